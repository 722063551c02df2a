#include "kernels/cuda/activation.cuh"

#include <algorithm>
#include <cstdint>

namespace folio::kernels::gpu {
namespace {

__device__ inline float SiluMul(float x, float up) { return x / (1.0f + expf(-x)) * up; }

// Grid-stride over the n * d outputs (kVec: over groups of 4, d % 4 == 0).
template <bool kVec>
__global__ void SiluAndMulKernel(const float* __restrict__ gate_up, int32_t d, int64_t total,
                                 float* __restrict__ out) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  if constexpr (kVec) {
    const int32_t d4 = d / 4;
    const float4* in4 = reinterpret_cast<const float4*>(gate_up);
    float4* out4 = reinterpret_cast<float4*>(out);
    for (int64_t v = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; v < total / 4; v += stride) {
      const int64_t row = v / d4;
      const int64_t col = v - row * d4;
      const float4 g = in4[row * 2 * d4 + col];
      const float4 u = in4[row * 2 * d4 + d4 + col];
      out4[v] = make_float4(SiluMul(g.x, u.x), SiluMul(g.y, u.y), SiluMul(g.z, u.z),
                            SiluMul(g.w, u.w));
    }
  } else {
    for (int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; e < total; e += stride) {
      const int64_t row = e / d;
      const int64_t col = e - row * d;
      out[e] = SiluMul(gate_up[row * 2 * d + col], gate_up[row * 2 * d + d + col]);
    }
  }
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

cudaError_t SiluAndMul(const float* gate_up, int32_t n, int32_t d, float* out,
                       cudaStream_t stream) {
  if (n < 0 || d <= 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (gate_up == nullptr || out == nullptr) return cudaErrorInvalidValue;
  const int64_t total = int64_t{n} * d;
  if (out < gate_up + 2 * total && gate_up < out + total) return cudaErrorInvalidValue;
  const bool vec = d % 4 == 0 && Aligned16(gate_up) && Aligned16(out);
  constexpr int kThreads = 256;
  const int64_t work = vec ? total / 4 : total;
  // Enough CTAs to fill any current GPU several times; the loop covers the rest.
  const unsigned blocks =
      static_cast<unsigned>(std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, 65536));
  if (vec) {
    SiluAndMulKernel<true><<<blocks, kThreads, 0, stream>>>(gate_up, d, total, out);
  } else {
    SiluAndMulKernel<false><<<blocks, kThreads, 0, stream>>>(gate_up, d, total, out);
  }
  return cudaGetLastError();
}

}  // namespace folio::kernels::gpu
