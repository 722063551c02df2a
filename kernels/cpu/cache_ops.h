// CPU cache ops: the reference twins of kernels/cuda/cache_ops.cuh, and the
// real ops of CPU workers. Layout: kernels/cache_layout.h.
//
// Each op checks its per-call arguments (pairs, slots, shapes) on entry and
// returns false with a reason in *error, having written nothing, when they
// are invalid. Views are trusted: REQUIRES view.Validate() (done once by the
// cache engine). Thread-safety: none; callers serialize ops on one pool.
#ifndef FOLIO_KERNELS_CPU_CACHE_OPS_H_
#define FOLIO_KERNELS_CPU_CACHE_OPS_H_

#include <cstdint>
#include <span>
#include <string>

#include "kernels/cache_layout.h"
#include "kernels/kv_cache_view.h"

namespace folio::kernels::cpu {

// Copy-on-write: for every pair, copies block src to block dst of the same
// pool, in every layer, K and V. Pairs must pass
// ValidateBlockPairs(..., same_pool=true).
bool CopyBlocks(const KvCacheView& view, std::span<const BlockPair> pairs,
                std::string* error = nullptr);

// Swap out (device pool -> host pool) or in (host -> device): for every pair,
// copies block src of `src` to block dst of `dst`, every layer, K and V. The
// pools must have the same num_layers and bytes_per_block. On CPU workers both
// pools are ordinary memory.
bool SwapBlocks(const KvCacheView& src, const KvCacheView& dst,
                std::span<const BlockPair> pairs, std::string* error = nullptr);

// Writes each token's new K and V into the paged cache of one layer.
// key, value: [num_tokens][num_kv_heads][head_dim] floats.
// slot_mapping: num_tokens slots; kSkipSlot (-1) skips the token (padding).
// The layer stores fp32 (layer.bytes_per_block == BlockElems(shape) * 4).
// REQUIRES: non-negative slots are distinct (else the last token wins).
bool ReshapeAndCache(const float* key, const float* value,
                     const int64_t* slot_mapping, int64_t num_tokens,
                     const CacheShape& shape, const KvLayerView& layer,
                     std::string* error = nullptr);

// The same into a layer stored as `dtype` (layer.bytes_per_block ==
// BlockBytes(shape, dtype)): fp32 as above, or int8 / fp8 e4m3 codes with
// per-block, per-KV-head scales. A quantized block's scale is set by the
// first tokens written into it (a write that covers offset 0 starts the
// block afresh): their absolute maximum / QuantizedMax. Later tokens that
// do not fit grow it by a power of two, and the block's earlier codes of
// that head are rescaled (exactly for fp8 away from its subnormals; int8
// rounds again, so a block that grew k times is off by at most one step of
// its final scale). REQUIRES: a sequence's positions are written in order,
// each once, as the scheduler's plans do.
bool ReshapeAndCache(const float* key, const float* value,
                     const int64_t* slot_mapping, int64_t num_tokens,
                     const CacheShape& shape, CacheDtype dtype, const KvLayerView& layer,
                     std::string* error = nullptr);

}  // namespace folio::kernels::cpu

#endif  // FOLIO_KERNELS_CPU_CACHE_OPS_H_
