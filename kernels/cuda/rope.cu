#include "kernels/cuda/rope.cuh"

#include <algorithm>
#include <cstdint>

namespace folio::kernels::gpu {
namespace {

// One CTA per token; thread j handles pair i = j % half of head j / half,
// the query heads first, then the key heads (consecutive threads touch
// consecutive floats: coalesced).
__global__ void RopeKernel(const float* __restrict__ cos_sin, int32_t max_position,
                           int32_t head_dim, const int32_t* __restrict__ positions,
                           float* __restrict__ q, int32_t num_heads, float* __restrict__ k,
                           int32_t num_kv_heads) {
  const int64_t t = blockIdx.x;
  const int32_t pos = positions[t];
  if (pos < 0 || pos >= max_position) return;
  const int32_t half = head_dim / 2;
  const float* cos = cos_sin + int64_t{pos} * head_dim;
  const float* sin = cos + half;
  const int32_t pairs = (num_heads + num_kv_heads) * half;
  for (int32_t j = threadIdx.x; j < pairs; j += blockDim.x) {
    const int32_t head = j / half;
    const int32_t i = j - head * half;
    float* x = head < num_heads
                   ? q + (t * num_heads + head) * head_dim
                   : k + (t * num_kv_heads + (head - num_heads)) * head_dim;
    const float a = x[i];
    const float b = x[i + half];
    const float c = cos[i];
    const float s = sin[i];
    x[i] = a * c - b * s;
    x[i + half] = b * c + a * s;
  }
}

}  // namespace

cudaError_t ApplyRope(const float* cos_sin, int32_t max_position, int32_t head_dim,
                      const int32_t* positions, int32_t num_tokens, float* q, int32_t num_heads,
                      float* k, int32_t num_kv_heads, cudaStream_t stream) {
  if (cos_sin == nullptr || max_position <= 0 || head_dim <= 0 || head_dim % 2 != 0 ||
      num_tokens < 0 || num_heads < 0 || num_kv_heads < 0) {
    return cudaErrorInvalidValue;
  }
  if (q == nullptr) num_heads = 0;
  if (k == nullptr) num_kv_heads = 0;
  if (num_tokens == 0 || num_heads + num_kv_heads == 0) return cudaSuccess;
  if (positions == nullptr) return cudaErrorInvalidValue;
  const int64_t pairs = int64_t{num_heads + num_kv_heads} * (head_dim / 2);
  if (int64_t{num_heads} + num_kv_heads > INT32_MAX / head_dim) return cudaErrorInvalidValue;
  const unsigned threads =
      static_cast<unsigned>(std::clamp<int64_t>((pairs + 31) / 32 * 32, 32, 512));
  RopeKernel<<<static_cast<unsigned>(num_tokens), threads, 0, stream>>>(
      cos_sin, max_position, head_dim, positions, q, num_heads, k, num_kv_heads);
  return cudaGetLastError();
}

}  // namespace folio::kernels::gpu
