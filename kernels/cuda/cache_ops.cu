#include "kernels/cuda/cache_ops.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>

namespace folio::kernels::gpu {
namespace {

// The view travels as a kernel parameter; keep it under the classic limit.
static_assert(sizeof(KvCacheView) + sizeof(void*) <= 4096);

// grid = (num_pairs, num_layers); each CTA copies one pair in one layer, K
// then V, in Word-sized units (16, 4 or 1 bytes, whatever alignment allows).
template <typename Word>
__global__ void CopyBlocksKernel(KvCacheView view, const BlockPair* pairs) {
  const BlockPair p = pairs[blockIdx.x];
  const int32_t layer = static_cast<int32_t>(blockIdx.y);
  const int64_t words = view.bytes_per_block / static_cast<int64_t>(sizeof(Word));
  for (int kv = 0; kv < 2; ++kv) {
    char* base = static_cast<char*>(kv == 0 ? view.k[layer] : view.v[layer]);
    const Word* src = reinterpret_cast<const Word*>(base + p.src * view.bytes_per_block);
    Word* dst = reinterpret_cast<Word*>(base + p.dst * view.bytes_per_block);
    for (int64_t i = threadIdx.x; i < words; i += blockDim.x) dst[i] = src[i];
  }
}

template <typename T>
__device__ inline T FromFloat(float x);
template <>
__device__ inline float FromFloat<float>(float x) { return x; }
template <>
__device__ inline __half FromFloat<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ inline __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// grid = num_tokens; each CTA writes one token's K and V (all heads).
template <typename T>
__global__ void ReshapeAndCacheKernel(const float* __restrict__ key,
                                      const float* __restrict__ value,
                                      const int64_t* __restrict__ slot_mapping,
                                      CacheShape shape, KvLayerView layer) {
  const int64_t token = blockIdx.x;
  const int64_t slot = slot_mapping[token];
  if (slot < 0 || slot >= layer.num_blocks * shape.block_size) return;
  const int64_t n = TokenElems(shape);
  T* k_cache = static_cast<T*>(layer.k);
  T* v_cache = static_cast<T*>(layer.v);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t dst = SlotElemIndex(shape, slot, i);
    k_cache[dst] = FromFloat<T>(key[token * n + i]);
    v_cache[dst] = FromFloat<T>(value[token * n + i]);
  }
}

// Threads per CTA for `work` independent items: a multiple of a warp, <= 512.
unsigned ThreadsFor(int64_t work) {
  return static_cast<unsigned>(std::clamp<int64_t>((work + 31) / 32 * 32, 32, 512));
}

}  // namespace

cudaError_t CopyBlocks(const KvCacheView& view, const BlockPair* pairs,
                       int64_t num_pairs, cudaStream_t stream) {
  if (num_pairs < 0 || num_pairs > INT_MAX || (num_pairs > 0 && pairs == nullptr) ||
      !view.Validate()) {
    return cudaErrorInvalidValue;
  }
  if (num_pairs == 0) return cudaSuccess;
  // Widest word that every block start is aligned to.
  uintptr_t bits = static_cast<uintptr_t>(view.bytes_per_block);
  for (int32_t l = 0; l < view.num_layers; ++l) {
    bits |= reinterpret_cast<uintptr_t>(view.k[l]) | reinterpret_cast<uintptr_t>(view.v[l]);
  }
  const dim3 grid(static_cast<unsigned>(num_pairs), static_cast<unsigned>(view.num_layers));
  if (bits % 16 == 0) {
    CopyBlocksKernel<uint4><<<grid, ThreadsFor(view.bytes_per_block / 16), 0, stream>>>(view, pairs);
  } else if (bits % 4 == 0) {
    CopyBlocksKernel<uint32_t><<<grid, ThreadsFor(view.bytes_per_block / 4), 0, stream>>>(view, pairs);
  } else {
    CopyBlocksKernel<unsigned char><<<grid, ThreadsFor(view.bytes_per_block), 0, stream>>>(view, pairs);
  }
  return cudaGetLastError();
}

cudaError_t SwapBlocks(const KvCacheView& src, const KvCacheView& dst,
                       std::span<const BlockPair> pairs, cudaStream_t stream) {
  if (!src.Validate() || !dst.Validate() || src.num_layers != dst.num_layers ||
      src.bytes_per_block != dst.bytes_per_block ||
      !ValidateBlockPairs(pairs, src.num_blocks, dst.num_blocks, /*same_pool=*/false)) {
    return cudaErrorInvalidValue;
  }
  const int64_t bytes = src.bytes_per_block;
  size_t i = 0;
  while (i < pairs.size()) {
    // Merge runs of consecutive src and dst blocks into one copy: the block
    // manager often hands out neighbours, and each memcpy call costs ~µs.
    size_t run = 1;
    while (i + run < pairs.size() && pairs[i + run].src == pairs[i].src + int64_t(run) &&
           pairs[i + run].dst == pairs[i].dst + int64_t(run)) {
      ++run;
    }
    for (int32_t l = 0; l < src.num_layers; ++l) {
      for (int kv = 0; kv < 2; ++kv) {
        const char* s = static_cast<const char*>(kv == 0 ? src.k[l] : src.v[l]);
        char* d = static_cast<char*>(kv == 0 ? dst.k[l] : dst.v[l]);
        cudaError_t err = cudaMemcpyAsync(d + pairs[i].dst * bytes, s + pairs[i].src * bytes,
                                          static_cast<size_t>(bytes * int64_t(run)),
                                          cudaMemcpyDefault, stream);
        if (err != cudaSuccess) return err;
      }
    }
    i += run;
  }
  return cudaSuccess;
}

cudaError_t ReshapeAndCache(const float* key, const float* value,
                            const int64_t* slot_mapping, int64_t num_tokens,
                            const CacheShape& shape, CacheDtype dtype,
                            const KvLayerView& layer, cudaStream_t stream) {
  if (!ValidateLayerView(layer) ||
      !ValidateCacheShape(shape, dtype, layer.bytes_per_block) ||
      num_tokens < 0 || num_tokens > INT_MAX ||
      (num_tokens > 0 && (key == nullptr || value == nullptr || slot_mapping == nullptr))) {
    return cudaErrorInvalidValue;
  }
  if (num_tokens == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(num_tokens));
  const unsigned threads = ThreadsFor(TokenElems(shape));
  switch (dtype) {
    case CacheDtype::kFloat32:
      ReshapeAndCacheKernel<float><<<grid, threads, 0, stream>>>(key, value, slot_mapping, shape, layer);
      break;
    case CacheDtype::kFloat16:
      ReshapeAndCacheKernel<__half><<<grid, threads, 0, stream>>>(key, value, slot_mapping, shape, layer);
      break;
    case CacheDtype::kBFloat16:
      ReshapeAndCacheKernel<__nv_bfloat16><<<grid, threads, 0, stream>>>(key, value, slot_mapping, shape, layer);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace folio::kernels::gpu
