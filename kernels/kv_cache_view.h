// Plain by-value views of a paged KV cache pool, shared by the CPU and CUDA
// cache ops. A view owns nothing: the cache engine allocates the per-layer K
// and V tensors (layout in kernels/cache_layout.h), fills a view once,
// validates it once on the host, and then passes it by value to every op.
//
// Thread-safety: views are immutable values; concurrent ops on overlapping
// blocks are the caller's problem (the scheduler never plans them).
#ifndef FOLIO_KERNELS_KV_CACHE_VIEW_H_
#define FOLIO_KERNELS_KV_CACHE_VIEW_H_

#include <cstdint>
#include <span>
#include <string>

#include "kernels/cache_layout.h"

namespace folio::kernels {

// One block move: `src` indexes the source pool, `dst` the destination pool
// (the same pool for copy-on-write copies).
struct BlockPair {
  int64_t src = 0;
  int64_t dst = 0;
};

// One layer's K and V tensors of a pool.
struct KvLayerView {
  void* k = nullptr;
  void* v = nullptr;
  int64_t num_blocks = 0;
  int64_t bytes_per_block = 0;  // BlockElems(shape) * element bytes
};

// A whole pool (device or host): every layer's K and V base pointers.
// The pointer tables live inside the struct so the view can be passed to a
// CUDA kernel by value with no device-side table to allocate; 128 layers keep
// it ~2 KiB, under the 4 KiB classic kernel-parameter limit.
struct KvCacheView {
  static constexpr int32_t kMaxLayers = 128;

  void* k[kMaxLayers] = {};
  void* v[kMaxLayers] = {};
  int32_t num_layers = 0;
  int64_t num_blocks = 0;
  int64_t bytes_per_block = 0;

  // REQUIRES: 0 <= layer < num_layers.
  FOLIO_HOST_DEVICE KvLayerView Layer(int32_t layer) const {
    return KvLayerView{k[layer], v[layer], num_blocks, bytes_per_block};
  }

  // Host only. True when the view is usable: 1 <= num_layers <= kMaxLayers,
  // num_blocks > 0, bytes_per_block > 0, no null K/V pointer. Otherwise false
  // with a reason in *error (when error is not null).
  bool Validate(std::string* error = nullptr) const;
};

// Host only. Same checks as KvCacheView::Validate for one layer.
bool ValidateLayerView(const KvLayerView& layer, std::string* error = nullptr);

// Host only. True when every pair has 0 <= src < src_blocks and
// 0 <= dst < dst_blocks, and no dst repeats (two writers of one block would
// race on the GPU). When same_pool (copy-on-write), also no dst may be the
// src of any pair, so the result cannot depend on the copy order.
bool ValidateBlockPairs(std::span<const BlockPair> pairs, int64_t src_blocks,
                        int64_t dst_blocks, bool same_pool,
                        std::string* error = nullptr);

// Host only. True when the shape is positive and the layer's
// bytes_per_block is BlockBytes(shape, dtype) (quantized blocks: codes and
// their scales).
bool ValidateCacheShape(const CacheShape& shape, CacheDtype dtype, int64_t bytes_per_block,
                        std::string* error = nullptr);

}  // namespace folio::kernels

#endif  // FOLIO_KERNELS_KV_CACHE_VIEW_H_
