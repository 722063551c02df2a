// RoPE against Hugging Face values (computed once with torch from
// transformers' _compute_default_rope_parameters / _compute_llama3_parameters
// / _compute_linear_scaling_rope_parameters / _compute_yarn_parameters and
// pasted here) and against a naive rotate_half formula.
#include "kernels/cpu/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <string>
#include <vector>

namespace folio::kernels::cpu {
namespace {

void ExpectRelNear(float got, double want, double rel, const std::string& what) {
  EXPECT_LE(std::fabs(got - want), rel * std::fabs(want))
      << what << ": got " << got << " want " << want;
}

// Llama 3.1 8B: head_dim 128, rope_theta 500000, rope_scaling llama3
// {factor 8, low_freq_factor 1, high_freq_factor 4, original 8192}.
// Indices 0..28 keep the default frequency, 29..34 are interpolated, 35..63
// are divided by 8.
TEST(RopeTest, Llama31InvFreqMatchesTransformers) {
  const RotaryEmbedding plain(128, 500000.0f, std::nullopt, 16);
  const RotaryEmbedding scaled(128, 500000.0f, RopeScalingParams{8.0f, 1.0f, 4.0f, 8192}, 16);
  struct Row {
    int i;
    double plain, scaled;
  };
  const Row rows[] = {
      {0, 1.000000000e+00, 1.000000000e+00},  {1, 8.146172166e-01, 8.146172166e-01},
      {10, 1.286873817e-01, 1.286873817e-01}, {28, 3.211446106e-03, 3.211446106e-03},
      {29, 2.616099082e-03, 2.166570630e-03}, {30, 2.131119603e-03, 1.371893683e-03},
      {32, 1.414213446e-03, 5.248460220e-04}, {34, 9.384738514e-04, 1.785077911e-04},
      {35, 7.644969737e-04, 9.556212171e-05}, {40, 2.742481884e-04, 3.428102355e-05},
      {63, 2.455140702e-06, 3.068925878e-07},
  };
  ASSERT_EQ(scaled.inv_freq().size(), 64u);
  for (const Row& r : rows) {
    ExpectRelNear(plain.inv_freq()[r.i], r.plain, 1e-6, "default " + std::to_string(r.i));
    ExpectRelNear(scaled.inv_freq()[r.i], r.scaled, 1e-6, "llama3 " + std::to_string(r.i));
  }
}

// Llama 3.2 1B: head_dim 64, factor 32.
TEST(RopeTest, Llama32InvFreqMatchesTransformers) {
  const RotaryEmbedding rope(64, 500000.0f, RopeScalingParams{32.0f, 1.0f, 4.0f, 8192}, 16);
  const std::pair<int, double> rows[] = {
      {0, 1.000000000e+00},  {13, 4.839421250e-03}, {14, 3.211446106e-03}, {15, 1.290548011e-03},
      {16, 4.295567051e-04}, {17, 9.708286234e-05}, {18, 1.946163866e-05}, {31, 9.418306490e-08},
  };
  for (const auto& [i, want] : rows) {
    ExpectRelNear(rope.inv_freq()[i], want, 1e-6, "inv_freq " + std::to_string(i));
  }
}

// linear: every frequency divided by the factor (theta 500000, factor 4).
TEST(RopeTest, LinearInvFreqMatchesTransformers) {
  RopeScalingParams c;
  c.type = RopeScalingType::kLinear;
  c.factor = 4.0f;
  const RotaryEmbedding rope(128, 500000.0f, c, 16);
  ExpectRelNear(rope.inv_freq()[0], 2.500000000e-01, 1e-6, "inv_freq 0");
  ExpectRelNear(rope.inv_freq()[31], 4.340116866e-04, 1e-6, "inv_freq 31");
  ExpectRelNear(rope.inv_freq()[63], 6.137851756e-07, 1e-6, "inv_freq 63");
  EXPECT_FLOAT_EQ(rope.Cos(0)[5], 1.0f);  // no attention factor
}

// yarn as Qwen2.5 documents it (head_dim 128, theta 1e6, factor 4, original
// 32768): correction range [23, 40]; below it the original frequencies,
// above it divided by 4, a ramp in between; cos and sin times
// 0.1 ln 4 + 1.
TEST(RopeTest, YarnMatchesTransformers) {
  RopeScalingParams c;
  c.type = RopeScalingType::kYarn;
  c.factor = 4.0f;
  c.original_max_position_embeddings = 32768;
  c.attention_factor = static_cast<float>(0.1 * std::log(4.0) + 1.0);
  const RotaryEmbedding rope(128, 1000000.0f, c, 100001);
  const std::pair<int, double> rows[] = {
      {0, 1.000000000e+00},  {1, 8.058422208e-01},  {10, 1.154782027e-01},
      {19, 1.654817164e-02}, {20, 1.333521493e-02}, {21, 1.074607857e-02},
      {30, 1.064360957e-03}, {40, 4.445698505e-05}, {41, 3.582531644e-05},
      {50, 5.133812465e-06}, {63, 3.102344408e-07},
  };
  for (const auto& [i, want] : rows) {
    ExpectRelNear(rope.inv_freq()[i], want, 1e-6, "inv_freq " + std::to_string(i));
  }
  EXPECT_NEAR(rope.Cos(100000)[20], 9.620986879e-02, 2e-5);
  EXPECT_NEAR(rope.Sin(100000)[20], 1.134557486e+00, 2e-5);
  EXPECT_NEAR(rope.Cos(0)[7], 1.138629436, 1e-6);  // the attention factor itself
}

// yarn without truncation (a fractional correction range [8.06, 20.1]).
TEST(RopeTest, YarnWithoutTruncationMatchesTransformers) {
  RopeScalingParams c;
  c.type = RopeScalingType::kYarn;
  c.factor = 8.0f;
  c.original_max_position_embeddings = 2048;
  c.truncate = false;
  const RotaryEmbedding rope(64, 10000.0f, c, 16);
  const std::pair<int, double> rows[] = {
      {0, 1.000000000e+00},  {5, 2.371373624e-01},  {10, 4.832290858e-02},
      {15, 6.614006590e-03}, {20, 4.194592184e-04}, {31, 1.666901881e-05},
  };
  for (const auto& [i, want] : rows) {
    ExpectRelNear(rope.inv_freq()[i], want, 1e-6, "inv_freq " + std::to_string(i));
  }
}

// transformers' cos/sin at a large position: fp32 angle, then cos/sin.
TEST(RopeTest, CosSinMatchTransformersAtLargePosition) {
  const RotaryEmbedding rope(128, 500000.0f, RopeScalingParams{8.0f, 1.0f, 4.0f, 8192}, 6000);
  EXPECT_NEAR(rope.Cos(5000)[40], 9.853460789e-01, 1e-6);
  EXPECT_NEAR(rope.Sin(5000)[40], 1.705670506e-01, 1e-6);
}

// The llama3 rule written naively in double, on a config of our own.
TEST(RopeTest, Llama3RuleMatchesNaiveFormula) {
  const RopeScalingParams c{4.0f, 1.0f, 2.0f, 1024};
  const int32_t dim = 64;
  const double theta = 10000.0;
  const RotaryEmbedding rope(dim, static_cast<float>(theta), c, 16);
  int low = 0, medium = 0, high = 0;
  for (int32_t i = 0; i < dim / 2; ++i) {
    const double f = 1.0 / std::pow(theta, 2.0 * i / dim);
    const double wavelen = 2 * std::numbers::pi / f;
    const double low_wavelen = 1024.0 / 1.0, high_wavelen = 1024.0 / 2.0;
    double want;
    if (wavelen < high_wavelen) {
      want = f, ++high;
    } else if (wavelen > low_wavelen) {
      want = f / 4.0, ++low;
    } else {
      const double smooth = (1024.0 / wavelen - 1.0) / (2.0 - 1.0);
      want = (1 - smooth) * f / 4.0 + smooth * f, ++medium;
    }
    ExpectRelNear(rope.inv_freq()[i], want, 1e-5, "inv_freq " + std::to_string(i));
  }
  EXPECT_GT(low, 0);
  EXPECT_GT(medium, 0);
  EXPECT_GT(high, 0);
}

// Apply against rotate_half written out per element:
//   out = x * cos(emb) + rotate_half(x) * sin(emb), emb = cat(freqs, freqs).
TEST(RopeTest, ApplyMatchesRotateHalf) {
  for (const int32_t dim : {64, 128, 80}) {
    const RotaryEmbedding rope(dim, 10000.0f, std::nullopt, 4096);
    const int32_t tokens = 9, heads = 4, kv_heads = 2;
    std::mt19937 rng(dim);
    std::uniform_real_distribution<float> uni(-2.0f, 2.0f);
    std::vector<int32_t> pos(tokens);
    for (int32_t& p : pos) p = std::uniform_int_distribution<int32_t>(0, 4095)(rng);
    pos[0] = 0;
    std::vector<float> q(tokens * heads * dim), k(tokens * kv_heads * dim);
    for (float& x : q) x = uni(rng);
    for (float& x : k) x = uni(rng);
    const std::vector<float> q0 = q, k0 = k;
    std::string error;
    ASSERT_TRUE(rope.CheckPositions(pos.data(), tokens, &error)) << error;
    rope.Apply(pos.data(), tokens, q.data(), heads, k.data(), kv_heads);

    auto naive = [&](const std::vector<float>& x0, int32_t nh, int32_t t, int32_t h, int32_t j) {
      const float* x = x0.data() + (int64_t{t} * nh + h) * dim;
      const int32_t half = dim / 2;
      const int32_t i = j % half;
      const double angle = static_cast<float>(pos[t]) * rope.inv_freq()[i];  // fp32 product
      const double rotated = j < half ? -double{x[j + half]} : double{x[j - half]};
      return x[j] * std::cos(angle) + rotated * std::sin(angle);
    };
    for (int32_t t = 0; t < tokens; ++t) {
      for (int32_t j = 0; j < dim; ++j) {
        for (int32_t h = 0; h < heads; ++h) {
          EXPECT_NEAR(q[(t * heads + h) * dim + j], naive(q0, heads, t, h, j), 1e-5)
              << "q dim " << dim << " t " << t << " h " << h << " j " << j;
        }
        for (int32_t h = 0; h < kv_heads; ++h) {
          EXPECT_NEAR(k[(t * kv_heads + h) * dim + j], naive(k0, kv_heads, t, h, j), 1e-5)
              << "k dim " << dim << " t " << t << " h " << h << " j " << j;
        }
      }
    }
    // Position 0 is the identity.
    for (int32_t j = 0; j < heads * dim; ++j) EXPECT_EQ(q[j], q0[j]);
  }
}

TEST(RopeTest, NullKeyIsSkipped) {
  const RotaryEmbedding rope(64, 10000.0f, std::nullopt, 8);
  std::vector<float> q(64, 1.0f);
  const int32_t pos = 3;
  rope.Apply(&pos, 1, q.data(), 1, nullptr, 0);
  EXPECT_NEAR(q[0], std::cos(3.0) - std::sin(3.0), 1e-6);
}

TEST(RopeTest, ValidationAndPositions) {
  std::string error;
  EXPECT_TRUE(RotaryEmbedding::Validate(128, 500000.0f, RopeScalingParams{}, 8192, &error))
      << error;
  EXPECT_FALSE(RotaryEmbedding::Validate(127, 10000.0f, std::nullopt, 16, &error));
  EXPECT_FALSE(RotaryEmbedding::Validate(64, 0.0f, std::nullopt, 16, &error));
  EXPECT_FALSE(RotaryEmbedding::Validate(64, 10000.0f, std::nullopt, 0, &error));
  EXPECT_FALSE(RotaryEmbedding::Validate(64, 10000.0f, RopeScalingParams{8.0f, 4.0f, 1.0f, 8192},
                                         16, &error));
  RopeScalingParams linear;
  linear.type = RopeScalingType::kLinear;
  linear.factor = 2.0f;
  EXPECT_TRUE(RotaryEmbedding::Validate(64, 10000.0f, linear, 16, &error)) << error;
  linear.factor = 0.0f;
  EXPECT_FALSE(RotaryEmbedding::Validate(64, 10000.0f, linear, 16, &error));
  RopeScalingParams yarn;
  yarn.type = RopeScalingType::kYarn;
  yarn.factor = 4.0f;
  EXPECT_TRUE(RotaryEmbedding::Validate(64, 10000.0f, yarn, 16, &error)) << error;
  for (float RopeScalingParams::*field : {&RopeScalingParams::beta_fast,
                                          &RopeScalingParams::beta_slow,
                                          &RopeScalingParams::attention_factor}) {
    RopeScalingParams bad = yarn;
    bad.*field = 0.0f;
    EXPECT_FALSE(RotaryEmbedding::Validate(64, 10000.0f, bad, 16, &error));
  }
  yarn.original_max_position_embeddings = 0;
  EXPECT_FALSE(RotaryEmbedding::Validate(64, 10000.0f, yarn, 16, &error));
  EXPECT_NE(error.find("yarn"), std::string::npos) << error;
  const RotaryEmbedding rope(64, 10000.0f, std::nullopt, 8);
  const int32_t ok[] = {0, 7}, bad[] = {3, 8};
  EXPECT_TRUE(rope.CheckPositions(ok, 2, &error)) << error;
  EXPECT_FALSE(rope.CheckPositions(bad, 2, &error));
  EXPECT_NE(error.find("position 8"), std::string::npos) << error;
}

}  // namespace
}  // namespace folio::kernels::cpu
