#include "worker/cuda/cuda_kv_cache.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/cuda/cache_ops.cuh"

namespace folio::gpu {

using kernels::BlockPair;

CudaKvCache::CudaKvCache(const Options& options)
    : options_(options),
      shape_{options.num_kv_heads, options.block_size, options.head_dim} {}

CudaKvCache::~CudaKvCache() {
  // Queued swaps or copies may still touch the pools.
  if (swap_stream_.get() != nullptr) cudaStreamSynchronize(swap_stream_.get());
  if (pairs_in_flight_) cudaEventSynchronize(pairs_uploaded_.get());
}

int64_t CudaKvCache::LayerBlockBytes(int32_t num_kv_heads, int32_t head_dim, int32_t block_size,
                                     kernels::CacheDtype dtype) {
  return kernels::BlockElems(kernels::CacheShape{num_kv_heads, block_size, head_dim}) *
         kernels::CacheDtypeBytes(dtype);
}

int64_t CudaKvCache::BytesPerBlock(int32_t num_layers, int32_t num_kv_heads, int32_t head_dim,
                                   int32_t block_size, kernels::CacheDtype dtype) {
  return 2 * int64_t{num_layers} * LayerBlockBytes(num_kv_heads, head_dim, block_size, dtype);
}

int64_t CudaKvCache::device_bytes() const {
  return 2 * int64_t{options_.num_layers} * options_.num_device_blocks * device_view_.bytes_per_block;
}

int64_t CudaKvCache::host_bytes() const { return static_cast<int64_t>(host_pool_.bytes()); }

CudaStatus CudaKvCache::Create(const Options& o, std::unique_ptr<CudaKvCache>* out) {
  if (o.num_layers <= 0 || o.num_layers > kernels::KvCacheView::kMaxLayers ||
      o.num_kv_heads <= 0 || o.head_dim <= 0 || o.block_size <= 0 || o.num_device_blocks <= 0 ||
      o.num_host_blocks < 0) {
    return CudaStatus::InvalidArgument(
        "CudaKvCache: need 1.." + std::to_string(kernels::KvCacheView::kMaxLayers) +
        " layers, positive kv heads / head_dim / block_size / device blocks, host blocks >= 0");
  }
  std::unique_ptr<CudaKvCache> c(new CudaKvCache(o));
  const int64_t block_bytes = LayerBlockBytes(o.num_kv_heads, o.head_dim, o.block_size, o.dtype);
  const size_t layer_bytes = size_t(block_bytes) * size_t(o.num_device_blocks);
  c->device_k_.resize(o.num_layers);
  c->device_v_.resize(o.num_layers);
  kernels::KvCacheView& dv = c->device_view_;
  dv.num_layers = o.num_layers;
  dv.num_blocks = o.num_device_blocks;
  dv.bytes_per_block = block_bytes;
  for (int32_t l = 0; l < o.num_layers; ++l) {
    FOLIO_RETURN_IF_NOT_OK(c->device_k_[l].Allocate(layer_bytes, "KV cache (device K)"));
    FOLIO_RETURN_IF_NOT_OK(c->device_v_[l].Allocate(layer_bytes, "KV cache (device V)"));
    if (o.zero_device_pool) {
      FOLIO_CUDA_RETURN_IF_ERROR(cudaMemset(c->device_k_[l].data(), 0, layer_bytes), "cudaMemset");
      FOLIO_CUDA_RETURN_IF_ERROR(cudaMemset(c->device_v_[l].data(), 0, layer_bytes), "cudaMemset");
    }
    dv.k[l] = c->device_k_[l].data();
    dv.v[l] = c->device_v_[l].data();
  }
  std::string error;
  if (!dv.Validate(&error)) return CudaStatus::Internal("CudaKvCache device view: " + error);
  if (o.num_host_blocks > 0) {
    const size_t host_layer_bytes = size_t(block_bytes) * size_t(o.num_host_blocks);
    FOLIO_RETURN_IF_NOT_OK(
        c->host_pool_.Allocate(2 * host_layer_bytes * size_t(o.num_layers), "KV cache (host pool)"));
    kernels::KvCacheView& hv = c->host_view_;
    hv.num_layers = o.num_layers;
    hv.num_blocks = o.num_host_blocks;
    hv.bytes_per_block = block_bytes;
    for (int32_t l = 0; l < o.num_layers; ++l) {
      hv.k[l] = c->host_pool_.data() + (2 * size_t(l)) * host_layer_bytes;
      hv.v[l] = c->host_pool_.data() + (2 * size_t(l) + 1) * host_layer_bytes;
    }
    if (!hv.Validate(&error)) return CudaStatus::Internal("CudaKvCache host view: " + error);
  }
  FOLIO_RETURN_IF_NOT_OK(c->swap_stream_.Create());
  FOLIO_RETURN_IF_NOT_OK(c->compute_done_.Create());
  FOLIO_RETURN_IF_NOT_OK(c->swap_done_.Create());
  FOLIO_RETURN_IF_NOT_OK(c->pairs_uploaded_.Create());
  // The memsets ran on the legacy stream, which the runner's non-blocking
  // stream does not wait for.
  if (o.zero_device_pool) {
    FOLIO_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  *out = std::move(c);
  return CudaStatus::Ok();
}

kernels::gpu::GpuPagedKvLayer CudaKvCache::AttentionLayer(int32_t layer) const {
  kernels::gpu::GpuPagedKvLayer kv{};
  kv.k = device_view_.k[layer];
  kv.v = device_view_.v[layer];
  kv.dtype = options_.dtype;
  kv.num_blocks = options_.num_device_blocks;
  kv.num_kv_heads = options_.num_kv_heads;
  kv.block_size = options_.block_size;
  kv.head_dim = options_.head_dim;
  return kv;
}

CudaStatus CudaKvCache::ExecuteBlockOps(std::span<const BlockPair> swap_out,
                                        std::span<const BlockPair> swap_in,
                                        std::span<const BlockPair> copies,
                                        cudaStream_t compute_stream) {
  std::string error;
  const int64_t dev = options_.num_device_blocks, host = options_.num_host_blocks;
  if ((!swap_out.empty() || !swap_in.empty()) && host == 0) {
    return CudaStatus::InvalidArgument("swap requested but the cache has no host pool");
  }
  if (!kernels::ValidateBlockPairs(swap_out, dev, host, /*same_pool=*/false, &error)) {
    return CudaStatus::InvalidArgument("swap_out: " + error);
  }
  if (!kernels::ValidateBlockPairs(swap_in, host, dev, /*same_pool=*/false, &error)) {
    return CudaStatus::InvalidArgument("swap_in: " + error);
  }
  if (!kernels::ValidateBlockPairs(copies, dev, dev, /*same_pool=*/true, &error)) {
    return CudaStatus::InvalidArgument("copies: " + error);
  }
  if (!swap_out.empty() || !swap_in.empty()) {
    // The swap stream starts after everything queued on the compute stream
    // (the last forward wrote the blocks being swapped out, or still reads
    // blocks a swap-in overwrites), and compute continues after the swaps.
    FOLIO_CUDA_RETURN_IF_ERROR(cudaEventRecord(compute_done_.get(), compute_stream),
                               "cudaEventRecord");
    FOLIO_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(swap_stream_.get(), compute_done_.get(), 0),
                               "cudaStreamWaitEvent");
    if (!swap_out.empty()) {
      FOLIO_CUDA_RETURN_IF_ERROR(
          kernels::gpu::SwapBlocks(device_view_, host_view_, swap_out, swap_stream_.get()),
          "SwapBlocks (out)");
    }
    if (!swap_in.empty()) {
      FOLIO_CUDA_RETURN_IF_ERROR(
          kernels::gpu::SwapBlocks(host_view_, device_view_, swap_in, swap_stream_.get()),
          "SwapBlocks (in)");
    }
    FOLIO_CUDA_RETURN_IF_ERROR(cudaEventRecord(swap_done_.get(), swap_stream_.get()),
                               "cudaEventRecord");
    FOLIO_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(compute_stream, swap_done_.get(), 0),
                               "cudaStreamWaitEvent");
  }
  if (!copies.empty()) {
    // The pinned staging may still be read by the previous step's upload.
    if (pairs_in_flight_) {
      FOLIO_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(pairs_uploaded_.get()),
                                 "cudaEventSynchronize");
      pairs_in_flight_ = false;
    }
    if (pairs_host_.size() < copies.size()) {
      const size_t want = std::max<size_t>(copies.size(), 64);
      FOLIO_RETURN_IF_NOT_OK(pairs_host_.Allocate(want, "copy pairs (pinned)"));
      // The device buffer may be read by a queued CopyBlocks.
      FOLIO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute_stream), "cudaStreamSynchronize");
      FOLIO_RETURN_IF_NOT_OK(pairs_device_.Allocate(want, "copy pairs (device)"));
    }
    std::memcpy(pairs_host_.data(), copies.data(), copies.size_bytes());
    FOLIO_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(pairs_device_.data(), pairs_host_.data(), copies.size_bytes(),
                        cudaMemcpyHostToDevice, compute_stream),
        "cudaMemcpyAsync (copy pairs)");
    FOLIO_CUDA_RETURN_IF_ERROR(cudaEventRecord(pairs_uploaded_.get(), compute_stream),
                               "cudaEventRecord");
    pairs_in_flight_ = true;
    FOLIO_CUDA_RETURN_IF_ERROR(
        kernels::gpu::CopyBlocks(device_view_, pairs_device_.data(),
                                 static_cast<int64_t>(copies.size()), compute_stream),
        "CopyBlocks");
  }
  return CudaStatus::Ok();
}

}  // namespace folio::gpu
