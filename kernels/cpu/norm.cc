#include "kernels/cpu/norm.h"

#include <cmath>

namespace folio::kernels::cpu {
namespace {

// Rows per call below which threads cost more than they save.
constexpr int64_t kMinParallelElems = 1 << 15;

float InvRms(const float* __restrict x, int32_t dim, float eps) {
  float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
  for (int32_t d = 0; d < dim; ++d) sq += x[d] * x[d];
  return 1.0f / std::sqrt(sq / static_cast<float>(dim) + eps);
}

void ScaleRow(const float* x, float inv, const float* __restrict weight, int32_t dim, float* out) {
#pragma omp simd
  for (int32_t d = 0; d < dim; ++d) out[d] = x[d] * inv * weight[d];
}

}  // namespace

void RmsNorm(const float* x, const float* weight, int32_t n, int32_t dim, float eps, float* out) {
  [[maybe_unused]] const bool parallel = int64_t{n} * dim >= kMinParallelElems && n > 1;
#pragma omp parallel for schedule(static) if (parallel)
  for (int32_t i = 0; i < n; ++i) {
    const float* xi = x + int64_t{i} * dim;
    ScaleRow(xi, InvRms(xi, dim, eps), weight, dim, out + int64_t{i} * dim);
  }
}

void FusedAddRmsNorm(float* x, float* residual, const float* weight, int32_t n, int32_t dim,
                     float eps) {
  [[maybe_unused]] const bool parallel = int64_t{n} * dim >= kMinParallelElems && n > 1;
#pragma omp parallel for schedule(static) if (parallel)
  for (int32_t i = 0; i < n; ++i) {
    float* __restrict xi = x + int64_t{i} * dim;
    float* __restrict ri = residual + int64_t{i} * dim;
#pragma omp simd
    for (int32_t d = 0; d < dim; ++d) ri[d] += xi[d];
    ScaleRow(ri, InvRms(ri, dim, eps), weight, dim, xi);
  }
}

}  // namespace folio::kernels::cpu
