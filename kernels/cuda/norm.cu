#include "kernels/cuda/norm.cuh"

#include <algorithm>
#include <cstdint>

namespace folio::kernels::gpu {
namespace {

// Sum over the CTA, returned to every thread. REQUIRES blockDim.x a multiple
// of 32 (<= 1024) and one call per kernel (the shared buffer is not reused).
__device__ float BlockSum(float v) {
  __shared__ float partial[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x) >> 5;
  v = lane < warps ? partial[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ inline float InvRms(float sq, int32_t dim, float eps) {
  return 1.0f / sqrtf(sq / static_cast<float>(dim) + eps);
}

// One CTA per row. kVec: dim % 4 == 0 and all pointers 16-byte aligned.
// x and out may be the same buffer: each element is read and written by the
// same thread, the write after the block-wide reduction.
template <bool kVec>
__global__ void RmsNormKernel(const float* x, const float* __restrict__ weight, int32_t dim,
                              float eps, float* out) {
  const int64_t row = blockIdx.x;
  const float* xr = x + row * dim;
  float* orow = out + row * dim;
  float sq = 0.0f;
  if constexpr (kVec) {
    const int32_t n4 = dim / 4;
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    for (int32_t i = threadIdx.x; i < n4; i += blockDim.x) {
      const float4 v = x4[i];
      sq += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    const float inv = InvRms(BlockSum(sq), dim, eps);
    const float4* w4 = reinterpret_cast<const float4*>(weight);
    float4* o4 = reinterpret_cast<float4*>(orow);
    for (int32_t i = threadIdx.x; i < n4; i += blockDim.x) {
      const float4 v = x4[i];
      const float4 w = w4[i];
      o4[i] = make_float4(v.x * inv * w.x, v.y * inv * w.y, v.z * inv * w.z, v.w * inv * w.w);
    }
  } else {
    for (int32_t i = threadIdx.x; i < dim; i += blockDim.x) sq += xr[i] * xr[i];
    const float inv = InvRms(BlockSum(sq), dim, eps);
    for (int32_t i = threadIdx.x; i < dim; i += blockDim.x) orow[i] = xr[i] * inv * weight[i];
  }
}

template <bool kVec>
__global__ void FusedAddRmsNormKernel(float* __restrict__ x, float* __restrict__ residual,
                                      const float* __restrict__ weight, int32_t dim, float eps) {
  const int64_t row = blockIdx.x;
  float* xr = x + row * dim;
  float* rr = residual + row * dim;
  float sq = 0.0f;
  if constexpr (kVec) {
    const int32_t n4 = dim / 4;
    float4* x4 = reinterpret_cast<float4*>(xr);
    float4* r4 = reinterpret_cast<float4*>(rr);
    for (int32_t i = threadIdx.x; i < n4; i += blockDim.x) {
      const float4 a = x4[i];
      float4 r = r4[i];
      r.x += a.x;
      r.y += a.y;
      r.z += a.z;
      r.w += a.w;
      r4[i] = r;
      sq += r.x * r.x + r.y * r.y + r.z * r.z + r.w * r.w;
    }
    const float inv = InvRms(BlockSum(sq), dim, eps);
    const float4* w4 = reinterpret_cast<const float4*>(weight);
    for (int32_t i = threadIdx.x; i < n4; i += blockDim.x) {
      const float4 r = r4[i];  // written by this thread above
      const float4 w = w4[i];
      x4[i] = make_float4(r.x * inv * w.x, r.y * inv * w.y, r.z * inv * w.z, r.w * inv * w.w);
    }
  } else {
    for (int32_t i = threadIdx.x; i < dim; i += blockDim.x) {
      const float r = rr[i] + xr[i];
      rr[i] = r;
      sq += r * r;
    }
    const float inv = InvRms(BlockSum(sq), dim, eps);
    for (int32_t i = threadIdx.x; i < dim; i += blockDim.x) xr[i] = rr[i] * inv * weight[i];
  }
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// A multiple of a warp covering `work` items once, within [32, 512].
unsigned ThreadsFor(int64_t work) {
  return static_cast<unsigned>(std::clamp<int64_t>((work + 31) / 32 * 32, 32, 512));
}

bool Overlap(const float* a, const float* b, int64_t elems) {
  return a < b + elems && b < a + elems;
}

}  // namespace

cudaError_t RmsNorm(const float* x, const float* weight, int32_t n, int32_t dim, float eps,
                    float* out, cudaStream_t stream) {
  if (n < 0 || dim <= 0 || !(eps >= 0.0f)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (x == nullptr || weight == nullptr || out == nullptr) return cudaErrorInvalidValue;
  const int64_t elems = int64_t{n} * dim;
  if (out != x && Overlap(x, out, elems)) return cudaErrorInvalidValue;
  const bool vec = dim % 4 == 0 && Aligned16(x) && Aligned16(weight) && Aligned16(out);
  const unsigned threads = ThreadsFor(vec ? dim / 4 : dim);
  if (vec) {
    RmsNormKernel<true><<<static_cast<unsigned>(n), threads, 0, stream>>>(x, weight, dim, eps, out);
  } else {
    RmsNormKernel<false><<<static_cast<unsigned>(n), threads, 0, stream>>>(x, weight, dim, eps, out);
  }
  return cudaGetLastError();
}

cudaError_t FusedAddRmsNorm(float* x, float* residual, const float* weight, int32_t n,
                            int32_t dim, float eps, cudaStream_t stream) {
  if (n < 0 || dim <= 0 || !(eps >= 0.0f)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (x == nullptr || residual == nullptr || weight == nullptr) return cudaErrorInvalidValue;
  if (Overlap(x, residual, int64_t{n} * dim)) return cudaErrorInvalidValue;
  const bool vec = dim % 4 == 0 && Aligned16(x) && Aligned16(residual) && Aligned16(weight);
  const unsigned threads = ThreadsFor(vec ? dim / 4 : dim);
  if (vec) {
    FusedAddRmsNormKernel<true><<<static_cast<unsigned>(n), threads, 0, stream>>>(x, residual, weight, dim, eps);
  } else {
    FusedAddRmsNormKernel<false><<<static_cast<unsigned>(n), threads, 0, stream>>>(x, residual, weight, dim, eps);
  }
  return cudaGetLastError();
}

}  // namespace folio::kernels::gpu
