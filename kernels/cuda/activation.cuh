// CUDA activations, twins of kernels/cpu/activation.h (tested by
// tests/gpu/layer_ops_gpu_check.cu), fp32.
//
// Plain C++ header (no device code). Asynchronous on `stream`; returns
// cudaErrorInvalidValue, enqueuing nothing, when a host-side check fails.
#ifndef FOLIO_KERNELS_CUDA_ACTIVATION_CUH_
#define FOLIO_KERNELS_CUDA_ACTIVATION_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace folio::kernels::gpu {

// SwiGLU gate of the Llama MLP (vLLM's silu_and_mul):
//     out[i][j] = silu(gate_up[i][j]) * gate_up[i][d + j],  silu(x) = x / (1 + e^-x)
// gate_up: device [n][2*d], the gate projection first, then the up projection.
// out: device [n][d], must not overlap gate_up. 16-byte vector loads when
// d % 4 == 0 and both pointers are 16-byte aligned. The CPU twin uses its own
// polynomial exp; results agree to a few ulp.
// REQUIRES: n >= 0, d > 0; pointers non-null when n > 0.
cudaError_t SiluAndMul(const float* gate_up, int32_t n, int32_t d, float* out,
                       cudaStream_t stream);

}  // namespace folio::kernels::gpu

#endif  // FOLIO_KERNELS_CUDA_ACTIVATION_CUH_
