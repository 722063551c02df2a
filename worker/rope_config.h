#ifndef FOLIO_WORKER_ROPE_CONFIG_H_
#define FOLIO_WORKER_ROPE_CONFIG_H_

// The model config's RoPE scaling as the rotary table's parameters (both
// devices build their table with kernels::cpu::RotaryEmbedding).

#include <optional>

#include "common/model_config.h"
#include "kernels/cpu/rope.h"

namespace folio {

// Dynamic NTK leaves the frequencies as they are within the context folio
// serves (ModelConfig::MaxModelLen).
inline std::optional<kernels::cpu::RopeScalingParams> RopeScalingOf(const ModelConfig& c) {
  if (!c.rope_scaling.has_value() || c.rope_scaling->type == RopeScalingType::kDynamic) {
    return std::nullopt;
  }
  const RopeScaling& s = *c.rope_scaling;
  kernels::cpu::RopeScalingParams p;
  p.factor = s.factor;
  p.low_freq_factor = s.low_freq_factor;
  p.high_freq_factor = s.high_freq_factor;
  p.original_max_position_embeddings = s.original_max_position_embeddings;
  switch (s.type) {
    case RopeScalingType::kLlama3:
      p.type = kernels::cpu::RopeScalingType::kLlama3;
      break;
    case RopeScalingType::kLinear:
      p.type = kernels::cpu::RopeScalingType::kLinear;
      break;
    case RopeScalingType::kYarn:
      p.type = kernels::cpu::RopeScalingType::kYarn;
      break;
    case RopeScalingType::kDynamic:
      break;  // returned above
  }
  p.beta_fast = s.beta_fast;
  p.beta_slow = s.beta_slow;
  p.truncate = s.truncate;
  p.attention_factor = s.attention_factor;
  return p;
}

}  // namespace folio

#endif  // FOLIO_WORKER_ROPE_CONFIG_H_
