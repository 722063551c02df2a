// RMSNorm, SiLU-and-mul and the fast exp they rely on, against naive double
// formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/vec_math.h"

namespace folio::kernels::cpu {
namespace {

std::vector<float> Random(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = uni(rng);
  return v;
}

std::vector<double> NaiveRmsNorm(const std::vector<float>& x, const std::vector<float>& w,
                                 int32_t n, int32_t dim, double eps) {
  std::vector<double> out(x.size());
  for (int32_t i = 0; i < n; ++i) {
    double sq = 0;
    for (int32_t d = 0; d < dim; ++d) sq += double{x[i * dim + d]} * x[i * dim + d];
    const double inv = 1.0 / std::sqrt(sq / dim + eps);
    for (int32_t d = 0; d < dim; ++d) out[i * dim + d] = x[i * dim + d] * inv * w[d];
  }
  return out;
}

TEST(RmsNormTest, MatchesNaiveFormula) {
  for (const auto& [n, dim] : {std::pair{1, 4096}, {7, 64}, {33, 2048}, {3, 8}, {5, 100}}) {
    const std::vector<float> x = Random(int64_t{n} * dim, -3.0f, 3.0f, dim + n);
    const std::vector<float> w = Random(dim, 0.5f, 1.5f, dim);
    const std::vector<double> want = NaiveRmsNorm(x, w, n, dim, 1e-5);
    std::vector<float> out(x.size());
    RmsNorm(x.data(), w.data(), n, dim, 1e-5f, out.data());
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_NEAR(out[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << n << "x" << dim << " @" << i;
    }
    std::vector<float> in_place = x;
    RmsNorm(in_place.data(), w.data(), n, dim, 1e-5f, in_place.data());
    EXPECT_EQ(in_place, out);
  }
}

TEST(RmsNormTest, EpsDominatesZeroRow) {
  const std::vector<float> x(16, 0.0f), w(16, 1.0f);
  std::vector<float> out(16, 1.0f);
  RmsNorm(x.data(), w.data(), 1, 16, 1e-6f, out.data());
  for (float y : out) EXPECT_EQ(y, 0.0f);
}

TEST(FusedAddRmsNormTest, AddsResidualThenNormalizes) {
  const int32_t n = 9, dim = 1024;
  std::vector<float> x = Random(n * dim, -2.0f, 2.0f, 1);
  std::vector<float> residual = Random(n * dim, -2.0f, 2.0f, 2);
  const std::vector<float> w = Random(dim, 0.5f, 1.5f, 3);
  std::vector<float> sum(n * dim);
  for (int32_t i = 0; i < n * dim; ++i) sum[i] = x[i] + residual[i];
  const std::vector<double> want = NaiveRmsNorm(sum, w, n, dim, 1e-6);
  FusedAddRmsNorm(x.data(), residual.data(), w.data(), n, dim, 1e-6f);
  for (int32_t i = 0; i < n * dim; ++i) {
    ASSERT_EQ(residual[i], sum[i]) << i;
    ASSERT_NEAR(x[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << i;
  }
}

TEST(SiluAndMulTest, MatchesNaiveFormula) {
  for (const auto& [n, d] : {std::pair{1, 11008}, {5, 64}, {3, 13}}) {
    std::vector<float> gate_up = Random(int64_t{n} * 2 * d, -12.0f, 12.0f, n * d);
    // Extremes: far into both tails, zero.
    const float extremes[] = {-200.0f, -88.5f, -87.0f, -30.0f, 0.0f, 30.0f, 88.5f, 200.0f};
    for (size_t j = 0; j < std::size(extremes) && j < static_cast<size_t>(d); ++j) {
      gate_up[j] = extremes[j];
    }
    std::vector<float> out(int64_t{n} * d);
    SiluAndMul(gate_up.data(), n, d, out.data());
    for (int32_t i = 0; i < n; ++i) {
      for (int32_t j = 0; j < d; ++j) {
        const double x = gate_up[int64_t{i} * 2 * d + j];
        const double up = gate_up[int64_t{i} * 2 * d + d + j];
        const double want = x / (1.0 + std::exp(-x)) * up;
        ASSERT_NEAR(out[int64_t{i} * d + j], want, 1e-6 * (1 + std::fabs(want)))
            << "x " << x << " up " << up;
      }
    }
  }
}

TEST(FastExpTest, WithinFewUlpOfStdExp) {
  double max_rel = 0;
  for (double x = -87.0; x <= 88.0; x += 0.00731) {
    const float xf = static_cast<float>(x);
    const double want = std::exp(double{xf});
    max_rel = std::max(max_rel, std::fabs(FastExp(xf) - want) / want);
  }
  EXPECT_LT(max_rel, 3e-7);  // ~2.5 ulp
  EXPECT_EQ(FastExp(0.0f), 1.0f);
  EXPECT_EQ(FastExp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(FastExp(-100.0f), 0.0f);
  EXPECT_TRUE(std::isfinite(FastExp(1000.0f)));
}

}  // namespace
}  // namespace folio::kernels::cpu
