// PackedGemm against a naive double-precision product over the same stored
// weights (PackedMatrix::Row), for every weight type, every instruction set
// this machine runs (portable, AVX2, AVX-512),
// and shapes that hit each tile kernel, partial panels, k-slices and row
// blocks; plus what packing itself must keep (bf16 rounding, int8 error).
#include "kernels/cpu/packed_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/threads.h"

namespace folio::kernels::cpu {
namespace {

std::vector<float> RandomVector(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// out[m][r] = sum_k x[m][k] * W[r][k] in double, with W's stored values; and
// the bound sum_k |x||w| that rounding error is measured against.
void Reference(const std::vector<float>& x, int32_t n, const PackedMatrix& w,
               std::vector<double>* out, std::vector<double>* magnitude) {
  const int32_t R = w.rows(), K = w.cols();
  std::vector<float> row(K);
  out->assign(size_t(n) * R, 0.0);
  magnitude->assign(size_t(n) * R, 0.0);
  for (int32_t r = 0; r < R; ++r) {
    w.Row(r, row.data());
    for (int32_t m = 0; m < n; ++m) {
      double s = 0, a = 0;
      for (int32_t k = 0; k < K; ++k) {
        s += double(x[size_t(m) * K + k]) * row[k];
        a += std::fabs(double(x[size_t(m) * K + k]) * row[k]);
      }
      (*out)[size_t(m) * R + r] = s;
      (*magnitude)[size_t(m) * R + r] = a;
    }
  }
}

using Shape = std::tuple<int32_t, int32_t, int32_t>;  // n, rows, cols

class PackedGemmTest : public ::testing::TestWithParam<std::tuple<WeightType, std::string, Shape>> {
 protected:
  void TearDown() override { SetPackedGemmIsaForTesting("best"); }
};

TEST_P(PackedGemmTest, MatchesNaiveProductOfTheStoredWeights) {
  const auto [type, isa, shape] = GetParam();
  const auto [n, rows, cols] = shape;
  SetPackedGemmIsaForTesting(isa);
  ASSERT_EQ(PackedGemmIsa(), isa);
  const std::vector<float> w = RandomVector(size_t(rows) * cols, 7 + rows + cols);
  const std::vector<float> x = RandomVector(size_t(n) * cols, 11 + n);
  const PackedMatrix packed = PackedMatrix::Pack(w.data(), rows, cols, type);
  ASSERT_EQ(packed.rows(), rows);
  ASSERT_EQ(packed.cols(), cols);
  // Sentinels around out catch a write past the valid columns or rows.
  std::vector<float> out(size_t(n) * rows + 32, -777.0f);
  PackedGemm(x.data(), n, packed, out.data() + 16);
  std::vector<double> want, magnitude;
  Reference(x, n, packed, &want, &magnitude);
  for (int32_t i = 0; i < 16; ++i) {
    ASSERT_EQ(out[i], -777.0f);
    ASSERT_EQ(out[out.size() - 1 - i], -777.0f);
  }
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(out[16 + i] - want[i]);
    ASSERT_LE(err, 1e-5 * magnitude[i] + 1e-6)
        << "row " << i / rows << " col " << i % rows << ": " << out[16 + i] << " vs " << want[i];
  }
}

std::string CaseName(const ::testing::TestParamInfo<PackedGemmTest::ParamType>& info) {
  const auto [type, isa, shape] = info.param;
  const auto [n, rows, cols] = shape;
  return std::string(WeightTypeName(type)) + "_" + isa + "_" + std::to_string(n) + "x" +
         std::to_string(rows) + "x" + std::to_string(cols);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PackedGemmTest,
    ::testing::Combine(
        ::testing::Values(WeightType::kFloat32, WeightType::kBFloat16, WeightType::kInt8),
        ::testing::ValuesIn(PackedGemmIsas()),
        ::testing::Values(Shape{1, 16, 8}, Shape{1, 1, 1}, Shape{1, 100, 37}, Shape{2, 33, 64},
                          Shape{3, 64, 300}, Shape{4, 17, 5}, Shape{5, 48, 513}, Shape{6, 31, 256},
                          Shape{7, 80, 257}, Shape{13, 50, 600}, Shape{16, 64, 512},
                          Shape{32, 40, 100}, Shape{97, 23, 300}, Shape{200, 70, 70},
                          Shape{12, 64, 40}, Shape{25, 100, 260}, Shape{2, 65, 10},
                          Shape{0, 16, 16})),
    CaseName);

TEST(PackedGemm, AvailableIsaIsNamed) {
  const std::string isa(PackedGemmIsa());
  EXPECT_TRUE(isa == "avx512" || isa == "avx2" || isa == "portable") << isa;
  EXPECT_EQ(PackedGemmIsas().back(), isa);
}

TEST(PackedGemm, SameResultOnOneThreadAndOnAll) {
  const int32_t n = 9, rows = 250, cols = 384;
  const std::vector<float> w = RandomVector(size_t(rows) * cols, 3);
  const std::vector<float> x = RandomVector(size_t(n) * cols, 4);
  const PackedMatrix packed = PackedMatrix::Pack(w.data(), rows, cols, WeightType::kFloat32);
  std::vector<float> all(size_t(n) * rows), one(size_t(n) * rows);
  PackedGemm(x.data(), n, packed, all.data());
  const int32_t threads = KernelThreads();
  SetKernelThreads(1);
  PackedGemm(x.data(), n, packed, one.data());
  SetKernelThreads(threads);
  // Each output is summed by one thread in one order: bitwise equal.
  EXPECT_EQ(all, one);
}

TEST(PackedMatrix, Float32RowsAreStoredExactly) {
  const int32_t rows = 19, cols = 23;
  const std::vector<float> w = RandomVector(size_t(rows) * cols, 5);
  const PackedMatrix packed = PackedMatrix::Pack(w.data(), rows, cols, WeightType::kFloat32);
  std::vector<float> row(cols);
  for (int32_t r = 0; r < rows; ++r) {
    packed.Row(r, row.data());
    for (int32_t k = 0; k < cols; ++k) ASSERT_EQ(row[k], w[size_t(r) * cols + k]);
  }
  EXPECT_EQ(packed.bytes(), int64_t{2} * 16 * cols * 4);  // two panels, zero-padded
}

TEST(PackedMatrix, Bfloat16RoundsToNearestEvenAndKeepsBf16ValuesExactly) {
  // 1 + 2^-8 is halfway between bf16 1.0 and 1 + 2^-7: ties to even (1.0);
  // 1 + 3 * 2^-8 ties up to 1 + 2^-6; bf16 values themselves stay exact.
  const std::vector<float> w = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-7f, -2.5f,
                                3.0e38f, 1.0e-40f, 0.0f, -0.0f};
  const PackedMatrix packed =
      PackedMatrix::Pack(w.data(), 1, static_cast<int32_t>(w.size()), WeightType::kBFloat16);
  std::vector<float> row(w.size());
  packed.Row(0, row.data());
  EXPECT_EQ(row[0], 1.0f);
  EXPECT_EQ(row[1], 1.0f + 0x1p-6f);
  EXPECT_EQ(row[2], 1.0f + 0x1p-7f);
  EXPECT_EQ(row[3], -2.5f);
  EXPECT_NEAR(row[4], 3.0e38f, 3.0e38f * 0x1p-8f);
  EXPECT_NEAR(row[5], 1.0e-40f, 0x1p-134f);  // half a subnormal bf16 step
  EXPECT_EQ(row[6], 0.0f);
  EXPECT_TRUE(std::signbit(row[7]));
  EXPECT_EQ(packed.bytes(), int64_t{16} * 8 * 2);
}

TEST(PackedMatrix, Int8IsSymmetricPerRowWithinHalfAStep) {
  const int32_t rows = 21, cols = 130;
  std::vector<float> w = RandomVector(size_t(rows) * cols, 9);
  for (int32_t k = 0; k < cols; ++k) w[size_t(3) * cols + k] = 0.0f;  // an all-zero row
  for (int32_t k = 0; k < cols; ++k) w[size_t(4) * cols + k] *= 1000.0f;  // a large one
  const PackedMatrix packed = PackedMatrix::Pack(w.data(), rows, cols, WeightType::kInt8);
  std::vector<float> row(cols);
  for (int32_t r = 0; r < rows; ++r) {
    float max_abs = 0;
    for (int32_t k = 0; k < cols; ++k) max_abs = std::max(max_abs, std::fabs(w[size_t(r) * cols + k]));
    const float step = max_abs / 127.0f;
    EXPECT_FLOAT_EQ(packed.scales()[r], step) << "row " << r;
    packed.Row(r, row.data());
    for (int32_t k = 0; k < cols; ++k) {
      ASSERT_LE(std::fabs(row[k] - w[size_t(r) * cols + k]), 0.5f * step * (1 + 1e-5f) + 1e-30f)
          << "row " << r << " col " << k;
    }
  }
  // A quarter of fp32's bytes, plus one scale per (padded) row.
  EXPECT_EQ(packed.bytes(), int64_t{2} * 16 * cols + 2 * 16 * 4);
}

}  // namespace
}  // namespace folio::kernels::cpu
