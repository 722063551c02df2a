// RMSNorm on the CPU (Llama, Mistral, Qwen2), fp32, matching Hugging Face's
// LlamaRMSNorm: y = x / sqrt(mean(x^2) + eps) * weight.
//
// Thread-safety: pure functions of their inputs; rows may be processed by
// several OpenMP threads inside one call.
#ifndef FOLIO_KERNELS_CPU_NORM_H_
#define FOLIO_KERNELS_CPU_NORM_H_

#include <cstdint>

namespace folio::kernels::cpu {

// out[i] = RMSNorm(x[i]) * weight for each of the n rows of x [n][dim].
// out may be x (in place) or a disjoint buffer. REQUIRES: dim > 0, eps >= 0.
void RmsNorm(const float* x, const float* weight, int32_t n, int32_t dim, float eps, float* out);

// The residual step of a decoder layer (vLLM's fused_add_rms_norm), per row:
//     residual += x;  x = RMSNorm(residual) * weight.
// x, residual: [n][dim], both updated in place; they must not overlap.
void FusedAddRmsNorm(float* x, float* residual, const float* weight, int32_t n, int32_t dim,
                     float eps);

}  // namespace folio::kernels::cpu

#endif  // FOLIO_KERNELS_CPU_NORM_H_
