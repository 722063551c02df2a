// A CUDA worker's KV cache: the device pool (one K and one V tensor per
// layer, each its own cudaMalloc, layout of kernels/cache_layout.h) and a
// pinned host pool for swapping, with the plan's block ops run through
// kernels/cuda/cache_ops.cuh:
//   - swap-out (device -> host) and swap-in (host -> device) on a stream of
//     the cache's own, ordered after the work already queued on the compute
//     stream, and the compute stream then waits for them (an event), so the
//     host thread does not block;
//   - copy-on-write copies (CopyBlocks) on the compute stream, after the swaps.
// The twin of worker/cache_engine.h (CPU), std-only.
//
// Thread-compatible: one thread (the rank's worker) drives it.
#ifndef FOLIO_WORKER_CUDA_CUDA_KV_CACHE_H_
#define FOLIO_WORKER_CUDA_CUDA_KV_CACHE_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/cache_layout.h"
#include "kernels/cuda/attention.cuh"
#include "kernels/kv_cache_view.h"
#include "worker/cuda/cuda_status.h"
#include "worker/cuda/device_buffer.h"

namespace folio::gpu {

class CudaKvCache {
 public:
  struct Options {
    int32_t num_layers = 0;
    int32_t num_kv_heads = 0;  // this rank's
    int32_t head_dim = 0;
    int32_t block_size = 16;
    int32_t num_device_blocks = 0;  // > 0
    int32_t num_host_blocks = 0;    // 0: no swap pool
    kernels::CacheDtype dtype = kernels::CacheDtype::kBFloat16;
    // Fill the device pool with zeros (cudaMemset) after allocation. Not
    // needed for correctness (attention reads only written slots).
    bool zero_device_pool = false;
  };

  // Allocates both pools. InvalidArgument for bad options (more than
  // KvCacheView::kMaxLayers layers included); Internal when out of memory.
  static CudaStatus Create(const Options& options, std::unique_ptr<CudaKvCache>* out);
  ~CudaKvCache();
  CudaKvCache(const CudaKvCache&) = delete;
  CudaKvCache& operator=(const CudaKvCache&) = delete;

  // Bytes of one block of one layer's K (or V).
  static int64_t LayerBlockBytes(int32_t num_kv_heads, int32_t head_dim, int32_t block_size,
                                 kernels::CacheDtype dtype);
  // Bytes of one block across all layers, K and V: what sizes the pools.
  static int64_t BytesPerBlock(int32_t num_layers, int32_t num_kv_heads, int32_t head_dim,
                               int32_t block_size, kernels::CacheDtype dtype);

  // The plan's block ops in the plan's order: swap_out, then swap_in, then
  // copy-on-write copies. Pairs are validated on the host first
  // (InvalidArgument, nothing enqueued). Asynchronous with respect to the
  // host; ordered after the work queued on `compute_stream` so far, and the
  // work queued on it afterwards sees the results. REQUIRES: a host pool for
  // swaps.
  CudaStatus ExecuteBlockOps(std::span<const kernels::BlockPair> swap_out,
                             std::span<const kernels::BlockPair> swap_in,
                             std::span<const kernels::BlockPair> copies,
                             cudaStream_t compute_stream);

  // Device pool, one layer: for ReshapeAndCache and for attention.
  kernels::KvLayerView Layer(int32_t layer) const { return device_view_.Layer(layer); }
  kernels::gpu::GpuPagedKvLayer AttentionLayer(int32_t layer) const;

  const kernels::KvCacheView& device_view() const { return device_view_; }
  const kernels::KvCacheView& host_view() const { return host_view_; }
  const kernels::CacheShape& shape() const { return shape_; }
  const Options& options() const { return options_; }
  kernels::CacheDtype dtype() const { return options_.dtype; }
  int32_t num_device_blocks() const { return options_.num_device_blocks; }
  int32_t num_host_blocks() const { return options_.num_host_blocks; }
  int64_t device_bytes() const;
  int64_t host_bytes() const;

 private:
  explicit CudaKvCache(const Options& options);

  const Options options_;
  const kernels::CacheShape shape_;
  std::vector<DeviceBuffer<uint8_t>> device_k_, device_v_;  // [layer]
  PinnedBuffer<uint8_t> host_pool_;  // [layer][K|V][num_host_blocks] blocks
  kernels::KvCacheView device_view_;
  kernels::KvCacheView host_view_;
  CudaStream swap_stream_;
  CudaEvent compute_done_, swap_done_, pairs_uploaded_;
  // Copy-on-write pairs: staged in pinned memory, uploaded on the compute
  // stream (pairs_uploaded_ tells when the staging may be rewritten).
  PinnedBuffer<kernels::BlockPair> pairs_host_;
  DeviceBuffer<kernels::BlockPair> pairs_device_;
  bool pairs_in_flight_ = false;
};

}  // namespace folio::gpu

#endif  // FOLIO_WORKER_CUDA_CUDA_KV_CACHE_H_
