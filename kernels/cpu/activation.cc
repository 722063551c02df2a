#include "kernels/cpu/activation.h"

#include "kernels/cpu/vec_math.h"

namespace folio::kernels::cpu {

void SiluAndMul(const float* gate_up, int32_t n, int32_t d, float* out) {
  [[maybe_unused]] const bool parallel = n > 1 && int64_t{n} * d >= (1 << 15);
#pragma omp parallel for schedule(static) if (parallel)
  for (int32_t i = 0; i < n; ++i) {
    const float* __restrict gate = gate_up + int64_t{i} * 2 * d;
    const float* __restrict up = gate + d;
    float* __restrict o = out + int64_t{i} * d;
#pragma omp simd
    for (int32_t j = 0; j < d; ++j) {
      const float x = gate[j];
      o[j] = x / (1.0f + FastExp(-x)) * up[j];
    }
  }
}

}  // namespace folio::kernels::cpu
