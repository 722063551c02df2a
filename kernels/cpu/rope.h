// Rotary position embedding (RoPE) on the CPU, Hugging Face "rotate_half"
// (GPT-NeoX) convention: for i < head_dim/2 the pair (x[i], x[i + head_dim/2])
// is rotated by angle position * inv_freq[i],
//     x[i]            <- x[i] * cos - x[i + half] * sin
//     x[i + half]     <- x[i + half] * cos + x[i] * sin
// with inv_freq[i] = theta^(-2i/head_dim), optionally rescaled by the
// config's rope scaling exactly as transformers computes it: "llama3"
// (_compute_llama3_parameters), "linear" (inv_freq / factor) or "yarn"
// (_compute_yarn_parameters: a ramp between interpolated and original
// frequencies, and cos/sin multiplied by its attention factor). The cos/sin
// table for positions [0, max_position) is computed once, in fp32 like
// transformers (angle = fp32(position) * fp32 inv_freq, rounded to fp32).
//
// Thread-safety: immutable after construction; Apply may run concurrently.
#ifndef FOLIO_KERNELS_CPU_ROPE_H_
#define FOLIO_KERNELS_CPU_ROPE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace folio::kernels::cpu {

enum class RopeScalingType { kLlama3, kLinear, kYarn };

// config.json's "rope_scaling" (or transformers v5 "rope_parameters"), with
// the defaults resolved. Fields a type does not use are ignored.
struct RopeScalingParams {
  float factor = 8.0f;
  float low_freq_factor = 1.0f;   // llama3
  float high_freq_factor = 4.0f;  // llama3
  int32_t original_max_position_embeddings = 8192;  // llama3, yarn
  RopeScalingType type = RopeScalingType::kLlama3;
  float beta_fast = 32.0f;        // yarn
  float beta_slow = 1.0f;         // yarn
  bool truncate = true;           // yarn: floor/ceil the correction range
  float attention_factor = 1.0f;  // yarn: multiplies cos and sin
};

class RotaryEmbedding {
 public:
  // True when the arguments can build a table: head_dim even and > 0,
  // theta > 0, max_position > 0, and with scaling factor > 0; llama3:
  // high_freq_factor > low_freq_factor > 0, original_max > 0; yarn:
  // original_max > 0, betas > 0, attention_factor > 0 (all finite).
  static bool Validate(int32_t head_dim, float theta,
                       const std::optional<RopeScalingParams>& scaling, int32_t max_position,
                       std::string* error = nullptr);

  // REQUIRES: Validate(...) of the same arguments.
  RotaryEmbedding(int32_t head_dim, float theta, std::optional<RopeScalingParams> scaling,
                  int32_t max_position);

  RotaryEmbedding(const RotaryEmbedding&) = delete;
  RotaryEmbedding& operator=(const RotaryEmbedding&) = delete;
  RotaryEmbedding(RotaryEmbedding&&) = default;
  RotaryEmbedding& operator=(RotaryEmbedding&&) = default;

  // Rotates, in place, token t's query heads q [num_tokens][num_heads]
  // [head_dim] and key heads k [num_tokens][num_kv_heads][head_dim] by
  // positions[t]. q or k may be null (with its head count 0 or not) to skip it.
  // REQUIRES: 0 <= positions[t] < max_position() (see CheckPositions).
  void Apply(const int32_t* positions, int32_t num_tokens, float* q, int32_t num_heads, float* k,
             int32_t num_kv_heads) const;

  // True when every position is in [0, max_position()).
  bool CheckPositions(const int32_t* positions, int32_t num_tokens,
                      std::string* error = nullptr) const;

  int32_t head_dim() const { return head_dim_; }
  int32_t max_position() const { return max_position_; }
  // The (scaled) inverse frequencies, head_dim / 2 of them.
  const std::vector<float>& inv_freq() const { return inv_freq_; }
  // cos and sin of position p: head_dim / 2 values each.
  const float* Cos(int32_t p) const { return table_.data() + int64_t{p} * head_dim_; }
  const float* Sin(int32_t p) const { return Cos(p) + head_dim_ / 2; }

 private:
  int32_t head_dim_;
  int32_t max_position_;
  std::vector<float> inv_freq_;
  std::vector<float> table_;  // [max_position][cos half | sin half]
};

}  // namespace folio::kernels::cpu

#endif  // FOLIO_KERNELS_CPU_ROPE_H_
