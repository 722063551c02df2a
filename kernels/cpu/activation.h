// Activations on the CPU, fp32.
//
// Thread-safety: pure functions; rows may run on several OpenMP threads.
#ifndef FOLIO_KERNELS_CPU_ACTIVATION_H_
#define FOLIO_KERNELS_CPU_ACTIVATION_H_

#include <cstdint>

namespace folio::kernels::cpu {

// SwiGLU gate of the Llama MLP (vLLM's silu_and_mul):
//     out[i][j] = silu(gate_up[i][j]) * gate_up[i][d + j],  silu(x) = x / (1 + e^-x)
// gate_up: [n][2*d], the gate projection first, then the up projection.
// out: [n][d], must not overlap gate_up.
void SiluAndMul(const float* gate_up, int32_t n, int32_t d, float* out);

}  // namespace folio::kernels::cpu

#endif  // FOLIO_KERNELS_CPU_ACTIVATION_H_
