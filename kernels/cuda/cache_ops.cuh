// CUDA cache ops, twins of kernels/cpu/cache_ops.h (tested against them by
// tests/gpu/cache_ops_gpu_check.cu). Layout: kernels/cache_layout.h.
//
// Plain C++ header (no device code) so .cc files of the worker can include it.
// Every op is asynchronous on `stream` and returns a cudaError_t; no
// exceptions. cudaErrorInvalidValue means an argument failed the host-side
// checks and nothing was enqueued. REQUIRES view.Validate() (done once by the
// cache engine); the ops re-check it anyway (O(layers)), because a bad
// pointer on the GPU poisons the whole context.
#ifndef FOLIO_KERNELS_CUDA_CACHE_OPS_CUH_
#define FOLIO_KERNELS_CUDA_CACHE_OPS_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "kernels/cache_layout.h"
#include "kernels/kv_cache_view.h"

// Named gpu, not cuda, so that it cannot hide libcu++'s ::cuda namespace.
namespace folio::kernels::gpu {

// Copy-on-write within one device pool: one kernel over all pairs and layers,
// K and V. `pairs` is device memory holding num_pairs entries that passed
// ValidateBlockPairs(..., same_pool=true) on the host before upload.
cudaError_t CopyBlocks(const KvCacheView& view, const BlockPair* pairs,
                       int64_t num_pairs, cudaStream_t stream);

// Swap between a device pool and a host pool (either direction, decided by
// the pointers: cudaMemcpyDefault). `pairs` is host memory. One
// cudaMemcpyAsync per run of consecutive pairs, per layer, for K and V.
// The host pool should be pinned (cudaMallocHost / cudaHostRegister), else the
// copies are not asynchronous.
cudaError_t SwapBlocks(const KvCacheView& src, const KvCacheView& dst,
                       std::span<const BlockPair> pairs, cudaStream_t stream);

// Writes each token's K and V into one layer of the paged cache, converting
// fp32 input to the storage type `dtype` (round to nearest).
// key, value: device [num_tokens][num_kv_heads][head_dim] floats;
// slot_mapping: device, num_tokens slots, kSkipSlot (-1) for padding.
// Slots cannot be checked on the host: out-of-range ones are skipped by the
// kernel rather than corrupting memory. REQUIRES distinct non-negative slots.
cudaError_t ReshapeAndCache(const float* key, const float* value,
                            const int64_t* slot_mapping, int64_t num_tokens,
                            const CacheShape& shape, CacheDtype dtype,
                            const KvLayerView& layer, cudaStream_t stream);

}  // namespace folio::kernels::gpu

#endif  // FOLIO_KERNELS_CUDA_CACHE_OPS_CUH_
