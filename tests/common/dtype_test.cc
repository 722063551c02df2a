#include "common/dtype.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace folio {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// An oracle independent of the bit tricks under test: the format's finite
// non-negative values in increasing order (from their definition), and the
// nearest one to |x| by value, ties to the even encoding.
struct Format {
  std::vector<double> values;  // values[bits] for bits in [0, max_finite]
  double inf_threshold;        // |x| >= this rounds to infinity
  uint16_t inf_bits;

  uint16_t Round(float x) const {
    uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    double a = std::fabs(static_cast<double>(x));
    if (a >= inf_threshold) return sign | inf_bits;
    size_t hi = std::lower_bound(values.begin(), values.end(), a) - values.begin();
    if (hi == 0) return sign;
    size_t lo = hi - 1;
    if (hi == values.size()) return sign | static_cast<uint16_t>(lo);
    double dlo = a - values[lo], dhi = values[hi] - a;
    size_t pick = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
    return sign | static_cast<uint16_t>(pick);
  }
};

Format Fp16Format() {
  Format f;
  for (uint32_t b = 0; b <= 0x7bff; ++b) {
    uint32_t e = b >> 10, m = b & 0x3ff;
    f.values.push_back(e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, static_cast<int>(e) - 25));
  }
  f.inf_threshold = 65520.0;  // 65504 + half an ulp (32 / 2)
  f.inf_bits = 0x7c00;
  return f;
}

Format Bf16Format() {
  Format f;
  for (uint32_t b = 0; b <= 0x7f7f; ++b) {
    uint32_t e = b >> 7, m = b & 0x7f;
    f.values.push_back(e == 0 ? std::ldexp(m, -133) : std::ldexp(128 + m, static_cast<int>(e) - 134));
  }
  f.inf_threshold = std::ldexp(256.0 * 2 - 1, 119);  // (2 - 2^-8) * 2^127
  f.inf_bits = 0x7f80;
  return f;
}

TEST(DTypeTest, SizesAndNames) {
  EXPECT_EQ(DTypeSize(DType::kF32), 4u);
  EXPECT_EQ(DTypeSize(DType::kF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_STREQ(DTypeName(DType::kF32), "F32");
  EXPECT_STREQ(DTypeName(DType::kF16), "F16");
  EXPECT_STREQ(DTypeName(DType::kBF16), "BF16");
}

TEST(Bf16Test, ExactValues) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBf16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToBf16(0.0f), 0x0000);
  EXPECT_EQ(FloatToBf16(-0.0f), 0x8000);
  EXPECT_EQ(Bf16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(Bf16ToFloat(0x4049), 3.140625f);
  EXPECT_TRUE(std::signbit(Bf16ToFloat(0x8000)));
}

TEST(Bf16Test, RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between 0x3f80 (even) and 0x3f81: down to even.
  EXPECT_EQ(FloatToBf16(FromBits(0x3f808000)), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 0x3f81 and 0x3f82 (even): up to even.
  EXPECT_EQ(FloatToBf16(FromBits(0x3f818000)), 0x3f82);
  // Just above / below halfway.
  EXPECT_EQ(FloatToBf16(FromBits(0x3f808001)), 0x3f81);
  EXPECT_EQ(FloatToBf16(FromBits(0x3f807fff)), 0x3f80);
  // Negative values round symmetrically.
  EXPECT_EQ(FloatToBf16(FromBits(0xbf818000)), 0xbf82);
  // A mantissa carry moves into the exponent: 2 - 2^-9 rounds to 2.
  EXPECT_EQ(FloatToBf16(FromBits(0x3fffffff)), 0x4000);
}

TEST(Bf16Test, InfNanAndOverflow) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FloatToBf16(inf), 0x7f80);
  EXPECT_EQ(FloatToBf16(-inf), 0xff80);
  EXPECT_TRUE(std::isinf(Bf16ToFloat(0x7f80)));
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds past the max
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload lives only in the dropped bits must not become Inf.
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(FromBits(0x7f800001)))));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(FromBits(0xff800001)))));
  EXPECT_EQ(FloatToBf16(FromBits(0xff800001)) & 0x8000, 0x8000);  // sign kept
  EXPECT_TRUE(std::isnan(Bf16ToFloat(0x7fc0)));
}

TEST(Bf16Test, EveryValueRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    float f = Bf16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToBf16(f), h) << std::hex << h;
  }
}

TEST(Bf16Test, MatchesNearestEvenOracleOnRandomFloats) {
  Format fmt = Bf16Format();
  std::mt19937 rng(1);
  for (int i = 0; i < 1'000'000; ++i) {
    float x = FromBits(static_cast<uint32_t>(rng()));
    if (std::isnan(x) || std::isinf(x)) continue;
    ASSERT_EQ(FloatToBf16(x), fmt.Round(x)) << std::hex << Bits(x);
  }
}

TEST(Fp16Test, ExactValues) {
  EXPECT_EQ(FloatToFp16(1.0f), 0x3c00);
  EXPECT_EQ(FloatToFp16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToFp16(0.5f), 0x3800);
  EXPECT_EQ(FloatToFp16(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToFp16(0.0f), 0x0000);
  EXPECT_EQ(FloatToFp16(-0.0f), 0x8000);
  EXPECT_EQ(Fp16ToFloat(0x3c00), 1.0f);
  EXPECT_EQ(Fp16ToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(Fp16ToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(Fp16ToFloat(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_TRUE(std::signbit(Fp16ToFloat(0x8000)));
}

TEST(Fp16Test, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 0x3c00 (even) and 0x3c01: down.
  EXPECT_EQ(FloatToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 0x3c01 and 0x3c02 (even): up.
  EXPECT_EQ(FloatToFp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(FloatToFp16(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3c01);
  EXPECT_EQ(FloatToFp16(-(1.0f + 3 * std::ldexp(1.0f, -11))), 0xbc02);
  // Mantissa carry into the exponent: 2 - 2^-12 rounds to 2.
  EXPECT_EQ(FloatToFp16(2.0f - std::ldexp(1.0f, -12)), 0x4000);
}

TEST(Fp16Test, Subnormals) {
  const float tiny = std::ldexp(1.0f, -24);  // smallest subnormal, 0x0001
  EXPECT_EQ(FloatToFp16(tiny), 0x0001);
  EXPECT_EQ(Fp16ToFloat(0x0001), tiny);
  EXPECT_EQ(Fp16ToFloat(0x03ff), 1023 * tiny);  // largest subnormal
  EXPECT_EQ(FloatToFp16(1023 * tiny), 0x03ff);
  EXPECT_EQ(FloatToFp16(-5 * tiny), 0x8005);
  EXPECT_EQ(Fp16ToFloat(0x8005), -5 * tiny);
  // Half the smallest subnormal ties to even (zero); anything above rounds up.
  EXPECT_EQ(FloatToFp16(tiny / 2), 0x0000);
  EXPECT_EQ(FloatToFp16(std::nextafter(tiny / 2, 1.0f)), 0x0001);
  EXPECT_EQ(FloatToFp16(-tiny / 2), 0x8000);
  EXPECT_EQ(FloatToFp16(tiny / 4), 0x0000);
  // 1.5 and 2.5 ulps tie to the even neighbour: 2 both times.
  EXPECT_EQ(FloatToFp16(1.5f * tiny), 0x0002);
  EXPECT_EQ(FloatToFp16(2.5f * tiny), 0x0002);
  // Halfway between the largest subnormal and the smallest normal: up to 0x0400.
  EXPECT_EQ(FloatToFp16(1023.5f * tiny), 0x0400);
  // Float32 subnormals are far below fp16's range.
  EXPECT_EQ(FloatToFp16(std::numeric_limits<float>::denorm_min()), 0x0000);
}

TEST(Fp16Test, InfNanAndOverflow) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FloatToFp16(inf), 0x7c00);
  EXPECT_EQ(FloatToFp16(-inf), 0xfc00);
  EXPECT_TRUE(std::isinf(Fp16ToFloat(0x7c00)));
  EXPECT_LT(Fp16ToFloat(0xfc00), 0.0f);
  EXPECT_EQ(FloatToFp16(65519.0f), 0x7bff);  // below halfway: max finite
  EXPECT_EQ(FloatToFp16(65520.0f), 0x7c00);  // halfway ties to even: Inf
  EXPECT_EQ(FloatToFp16(1e10f), 0x7c00);
  EXPECT_EQ(FloatToFp16(-1e10f), 0xfc00);
  EXPECT_EQ(FloatToFp16(std::numeric_limits<float>::max()), 0x7c00);
  uint16_t nan = FloatToFp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_TRUE(std::isnan(Fp16ToFloat(nan)));
  EXPECT_TRUE(std::isnan(Fp16ToFloat(FloatToFp16(FromBits(0x7f800001)))));  // payload in low bits
  EXPECT_TRUE(std::isnan(Fp16ToFloat(0x7c01)));
  EXPECT_TRUE(std::isnan(Fp16ToFloat(0xfe00)));
}

TEST(Fp16Test, EveryValueDecodesByDefinitionAndRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    float f = Fp16ToFloat(static_cast<uint16_t>(h));
    uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double expect = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, static_cast<int>(e) - 25);
    if (h & 0x8000) expect = -expect;
    if (e == 0x1f) {
      ASSERT_EQ(std::isnan(f), m != 0) << std::hex << h;
      if (m == 0) {
        ASSERT_TRUE(std::isinf(f));
      }
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), expect) << std::hex << h;
    ASSERT_EQ(FloatToFp16(f), h) << std::hex << h;
  }
}

TEST(Fp16Test, MatchesNearestEvenOracleOnRandomFloats) {
  Format fmt = Fp16Format();
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> log_mag(-30.0f, 18.0f);
  for (int i = 0; i < 1'000'000; ++i) {
    // Half fully random bit patterns, half magnitudes in and around fp16's range.
    float x = i % 2 ? FromBits(static_cast<uint32_t>(rng()))
                    : std::exp2(log_mag(rng)) * (rng() % 2 ? 1.0f : -1.0f);
    if (std::isnan(x) || std::isinf(x)) continue;
    ASSERT_EQ(FloatToFp16(x), fmt.Round(x)) << std::hex << Bits(x);
  }
}

#ifdef __FLT16_MAX__
// Where the compiler has a native _Float16, its correctly rounded conversion
// is a second oracle.
TEST(Fp16Test, MatchesCompilerFloat16) {
  std::mt19937 rng(3);
  for (int i = 0; i < 1'000'000; ++i) {
    float x = FromBits(static_cast<uint32_t>(rng()));
    if (std::isnan(x)) continue;
    _Float16 h = static_cast<_Float16>(x);
    uint16_t bits;
    std::memcpy(&bits, &h, 2);
    ASSERT_EQ(FloatToFp16(x), bits) << std::hex << Bits(x);
  }
}
#endif

}  // namespace
}  // namespace folio
