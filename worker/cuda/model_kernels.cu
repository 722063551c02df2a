#include "worker/cuda/model_kernels.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstring>

namespace folio::gpu {
namespace {

constexpr int kThreads = 256;

// Grid size for `work` items at kThreads per block, capped (grid-stride loops).
unsigned Blocks(int64_t work) {
  const int64_t b = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<int64_t>(b, 1, 65535 * 8));
}

__global__ void EmbeddingGatherKernel(const void* table, bool bf16, int32_t vocab_begin,
                                      int32_t vocab_count, int32_t hidden, const int32_t* ids,
                                      int32_t n, float* out) {
  const int64_t total = int64_t{n} * hidden;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / hidden, j = i % hidden;
    const int64_t local = int64_t{ids[t]} - vocab_begin;
    float value = 0.0f;
    if (local >= 0 && local < vocab_count) {
      const int64_t at = local * hidden + j;
      value = bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(table)[at])
                   : static_cast<const float*>(table)[at];
    }
    out[i] = value;
  }
}

__global__ void SplitQkvKernel(const float* qkv, int32_t n, int32_t q_width, int32_t kv_width,
                               float* q, float* k, float* v) {
  const int32_t width = q_width + 2 * kv_width;
  const int64_t total = int64_t{n} * width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / width;
    const int32_t c = static_cast<int32_t>(i % width);
    const float x = qkv[i];
    if (c < q_width) {
      q[t * q_width + c] = x;
    } else if (c < q_width + kv_width) {
      k[t * kv_width + (c - q_width)] = x;
    } else {
      v[t * kv_width + (c - q_width - kv_width)] = x;
    }
  }
}

__global__ void AddBiasKernel(float* y, const float* bias, int32_t m, int32_t n, int32_t ldy) {
  const int64_t total = int64_t{m} * n;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / n, c = i % n;
    y[r * ldy + c] += bias[c];
  }
}

__global__ void GatherRowsKernel(const float* x, int32_t d, const int32_t* rows, int32_t r,
                                 float* out) {
  const int64_t total = int64_t{r} * d;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / d, c = i % d;
    out[i] = x[int64_t{rows[row]} * d + c];
  }
}

__global__ void CastFloatToBf16Kernel(const float* x, int64_t count, __nv_bfloat16* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = __float2bfloat16_rn(x[i]);
  }
}

}  // namespace

cudaError_t EmbeddingGather(const void* table, bool table_is_bf16, int32_t vocab_begin,
                            int32_t vocab_count, int32_t hidden, const int32_t* ids, int32_t n,
                            float* out, cudaStream_t stream) {
  if (n <= 0 || hidden <= 0) return cudaSuccess;
  EmbeddingGatherKernel<<<Blocks(int64_t{n} * hidden), kThreads, 0, stream>>>(
      table, table_is_bf16, vocab_begin, vocab_count, hidden, ids, n, out);
  return cudaGetLastError();
}

cudaError_t SplitQkv(const float* qkv, int32_t n, int32_t q_width, int32_t kv_width, float* q,
                     float* k, float* v, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  SplitQkvKernel<<<Blocks(int64_t{n} * (q_width + 2 * kv_width)), kThreads, 0, stream>>>(
      qkv, n, q_width, kv_width, q, k, v);
  return cudaGetLastError();
}

cudaError_t AddBias(float* y, const float* bias, int32_t m, int32_t n, int32_t ldy,
                    cudaStream_t stream) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  AddBiasKernel<<<Blocks(int64_t{m} * n), kThreads, 0, stream>>>(y, bias, m, n, ldy);
  return cudaGetLastError();
}

cudaError_t GatherRows(const float* x, int32_t d, const int32_t* rows, int32_t r, float* out,
                       cudaStream_t stream) {
  if (r <= 0 || d <= 0) return cudaSuccess;
  GatherRowsKernel<<<Blocks(int64_t{r} * d), kThreads, 0, stream>>>(x, d, rows, r, out);
  return cudaGetLastError();
}

cudaError_t CastFloatToBf16(const float* x, int64_t count, uint16_t* out, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  CastFloatToBf16Kernel<<<Blocks(count), kThreads, 0, stream>>>(
      x, count, reinterpret_cast<__nv_bfloat16*>(out));
  return cudaGetLastError();
}

uint16_t FloatToBf16Bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  }
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

}  // namespace folio::gpu
