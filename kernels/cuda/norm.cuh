// CUDA RMSNorm, twins of kernels/cpu/norm.h (tested against them by
// tests/gpu/layer_ops_gpu_check.cu): y = x / sqrt(mean(x^2) + eps) * weight,
// fp32 in, fp32 math, fp32 out.
//
// Plain C++ header (no device code) so .cc files of the worker can include it.
// Every op is asynchronous on `stream` and returns a cudaError_t; no
// exceptions. cudaErrorInvalidValue means an argument failed the host-side
// checks and nothing was enqueued. All pointers are device memory. One CTA
// per row; 16-byte vector loads when dim % 4 == 0 and every pointer is
// 16-byte aligned. Results differ from the CPU twin only by the order of the
// sum of squares (relative error ~1e-6).
#ifndef FOLIO_KERNELS_CUDA_NORM_CUH_
#define FOLIO_KERNELS_CUDA_NORM_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace folio::kernels::gpu {

// out[i] = RMSNorm(x[i]) * weight for each of the n rows of x [n][dim].
// out may equal x (in place) or be a disjoint buffer (no partial overlap).
// REQUIRES: n >= 0, dim > 0, eps >= 0; x, weight, out non-null when n > 0.
cudaError_t RmsNorm(const float* x, const float* weight, int32_t n, int32_t dim, float eps,
                    float* out, cudaStream_t stream);

// The residual step of a decoder layer (vLLM's fused_add_rms_norm), per row:
//     residual += x;  x = RMSNorm(residual) * weight.
// x, residual: [n][dim], both updated in place; they must not overlap.
cudaError_t FusedAddRmsNorm(float* x, float* residual, const float* weight, int32_t n,
                            int32_t dim, float eps, cudaStream_t stream);

}  // namespace folio::kernels::gpu

#endif  // FOLIO_KERNELS_CUDA_NORM_CUH_
