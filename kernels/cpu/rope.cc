#include "kernels/cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/fail.h"

namespace folio::kernels::cpu {
namespace {

// transformers' _compute_default_rope_parameters:
//   1 / theta ** (arange(0, dim, 2).float() / dim)   (fp32)
// theta ** (2i / dim) in fp32: transformers' pos_freqs.
float PosFreq(int32_t i, int32_t head_dim, float theta) {
  const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
  return static_cast<float>(std::pow(double{theta}, double{exponent}));
}

std::vector<float> DefaultInvFreq(int32_t head_dim, float theta) {
  std::vector<float> inv(head_dim / 2);
  for (int32_t i = 0; i < head_dim / 2; ++i) inv[i] = 1.0f / PosFreq(i, head_dim, theta);
  return inv;
}

// transformers' _compute_llama3_parameters, step for step in fp32 (torch
// evaluates `scalar / tensor` as tensor.reciprocal() * scalar).
void ApplyLlama3(const RopeScalingParams& c, std::vector<float>& inv_freq) {
  const float old_context = static_cast<float>(c.original_max_position_embeddings);
  const float low_freq_wavelen = old_context / c.low_freq_factor;
  const float high_freq_wavelen = old_context / c.high_freq_factor;
  const float two_pi = static_cast<float>(2.0 * std::numbers::pi);
  for (float& f : inv_freq) {
    const float wavelen = (1.0f / f) * two_pi;
    // Long wavelengths (low frequencies) are divided by factor.
    const float llama = wavelen > low_freq_wavelen ? f / c.factor : f;
    // In between the two wavelengths: interpolate.
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    if (medium) {
      const float smooth = ((1.0f / wavelen) * old_context - c.low_freq_factor) /
                           (c.high_freq_factor - c.low_freq_factor);
      f = (1.0f - smooth) * llama / c.factor + smooth * llama;
    } else {
      f = llama;
    }
  }
}

// transformers' _compute_yarn_parameters: the correction range in double
// (Python floats), the frequency tensors in fp32.
void ApplyYarn(const RopeScalingParams& c, int32_t head_dim, float theta,
               std::vector<float>& inv_freq) {
  const double dim = head_dim;
  // The dimension whose wavelength turns `rotations` times in the original
  // context.
  auto correction_dim = [&](double rotations) {
    return dim * std::log(c.original_max_position_embeddings / (rotations * 2 * std::numbers::pi)) /
           (2 * std::log(double{theta}));
  };
  double low = correction_dim(c.beta_fast);
  double high = correction_dim(c.beta_slow);
  if (c.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;  // transformers: "prevent singularity"
  const float low_f = static_cast<float>(low);
  const float span_f = static_cast<float>(high - low);
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float pos_freq = PosFreq(static_cast<int32_t>(i), head_dim, theta);
    const float extrapolation = 1.0f / pos_freq;
    const float interpolation = 1.0f / (c.factor * pos_freq);
    const float ramp = std::clamp((static_cast<float>(i) - low_f) / span_f, 0.0f, 1.0f);
    const float keep = 1.0f - ramp;  // share of the original (extrapolated) frequency
    inv_freq[i] = interpolation * (1.0f - keep) + extrapolation * keep;
  }
}

}  // namespace

bool RotaryEmbedding::Validate(int32_t head_dim, float theta,
                               const std::optional<RopeScalingParams>& scaling,
                               int32_t max_position, std::string* error) {
  if (head_dim <= 0 || head_dim % 2 != 0) {
    return Fail(error, "rope head_dim " + std::to_string(head_dim) + " must be even and > 0");
  }
  if (!(theta > 0.0f)) return Fail(error, "rope theta must be positive");
  if (max_position <= 0) return Fail(error, "rope max_position must be positive");
  if (!scaling.has_value()) return true;
  const RopeScalingParams& c = *scaling;
  if (!(c.factor > 0.0f) || !std::isfinite(c.factor)) {
    return Fail(error, "rope_scaling needs a finite factor > 0");
  }
  switch (c.type) {
    case RopeScalingType::kLlama3:
      if (!(c.low_freq_factor > 0.0f) || !(c.high_freq_factor > c.low_freq_factor) ||
          c.original_max_position_embeddings <= 0) {
        return Fail(error,
                    "llama3 rope_scaling needs factor > 0, high_freq_factor > "
                    "low_freq_factor > 0 and original_max_position_embeddings > 0");
      }
      break;
    case RopeScalingType::kLinear:
      break;
    case RopeScalingType::kYarn:
      if (c.original_max_position_embeddings <= 0 || !(c.beta_fast > 0.0f) ||
          !(c.beta_slow > 0.0f) || !(c.attention_factor > 0.0f) ||
          !std::isfinite(c.beta_fast) || !std::isfinite(c.beta_slow) ||
          !std::isfinite(c.attention_factor)) {
        return Fail(error,
                    "yarn rope_scaling needs original_max_position_embeddings > 0 and "
                    "finite beta_fast, beta_slow and attention_factor > 0");
      }
      break;
  }
  return true;
}

RotaryEmbedding::RotaryEmbedding(int32_t head_dim, float theta,
                                 std::optional<RopeScalingParams> scaling, int32_t max_position)
    : head_dim_(head_dim),
      max_position_(max_position),
      inv_freq_(DefaultInvFreq(head_dim, theta)),
      table_(static_cast<size_t>(max_position) * head_dim) {
  float attention_factor = 1.0f;
  if (scaling.has_value()) {
    switch (scaling->type) {
      case RopeScalingType::kLlama3:
        ApplyLlama3(*scaling, inv_freq_);
        break;
      case RopeScalingType::kLinear:
        for (float& f : inv_freq_) f /= scaling->factor;
        break;
      case RopeScalingType::kYarn:
        ApplyYarn(*scaling, head_dim, theta, inv_freq_);
        attention_factor = scaling->attention_factor;
        break;
    }
  }
  const int32_t half = head_dim / 2;
  for (int32_t p = 0; p < max_position; ++p) {
    float* c = table_.data() + int64_t{p} * head_dim;
    for (int32_t i = 0; i < half; ++i) {
      // transformers: freqs = inv_freq @ position (fp32), then cos/sin (fp32).
      const float angle = static_cast<float>(p) * inv_freq_[i];
      // transformers: cos() * attention_scaling in fp32 (1 but for yarn).
      c[i] = static_cast<float>(std::cos(double{angle})) * attention_factor;
      c[half + i] = static_cast<float>(std::sin(double{angle})) * attention_factor;
    }
  }
}

bool RotaryEmbedding::CheckPositions(const int32_t* positions, int32_t num_tokens,
                                     std::string* error) const {
  for (int32_t t = 0; t < num_tokens; ++t) {
    if (positions[t] < 0 || positions[t] >= max_position_) {
      return Fail(error, "token " + std::to_string(t) + " position " +
                             std::to_string(positions[t]) + " outside [0, " +
                             std::to_string(max_position_) + ")");
    }
  }
  return true;
}

namespace {

void RotateHeads(float* x, int32_t num_heads, int32_t head_dim, const float* __restrict cos,
                 const float* __restrict sin) {
  const int32_t half = head_dim / 2;
  for (int32_t h = 0; h < num_heads; ++h) {
    float* __restrict x1 = x + int64_t{h} * head_dim;
    float* __restrict x2 = x1 + half;
#pragma omp simd
    for (int32_t i = 0; i < half; ++i) {
      const float a = x1[i];
      const float b = x2[i];
      x1[i] = a * cos[i] - b * sin[i];
      x2[i] = b * cos[i] + a * sin[i];
    }
  }
}

}  // namespace

void RotaryEmbedding::Apply(const int32_t* positions, int32_t num_tokens, float* q,
                            int32_t num_heads, float* k, int32_t num_kv_heads) const {
  const int64_t elems = int64_t{num_tokens} * (num_heads + num_kv_heads) * head_dim_;
  [[maybe_unused]] const bool parallel = num_tokens > 1 && elems >= (1 << 16);
#pragma omp parallel for schedule(static) if (parallel)
  for (int32_t t = 0; t < num_tokens; ++t) {
    const float* cos = Cos(positions[t]);
    const float* sin = Sin(positions[t]);
    if (q != nullptr) {
      RotateHeads(q + int64_t{t} * num_heads * head_dim_, num_heads, head_dim_, cos, sin);
    }
    if (k != nullptr) {
      RotateHeads(k + int64_t{t} * num_kv_heads * head_dim_, num_kv_heads, head_dim_, cos, sin);
    }
  }
}

}  // namespace folio::kernels::cpu
