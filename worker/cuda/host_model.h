// A std-only, non-owning view of one rank's model weights on the host, fp32,
// in exactly the layouts of worker/model_weights.h (LayerWeights, ModelWeights)
// — which cannot be included here because it pulls in abseil. The full
// build fills a HostModel from a ModelWeights (pointers into its vectors);
// tests/gpu fill it from the safetensors directly. CudaModelRunner uploads
// it to the device and does not keep it.
//
// Thread-safety: a plain value; the pointed-to tensors must stay alive and
// unchanged while a CudaModelRunner is being created from it.
#ifndef FOLIO_WORKER_CUDA_HOST_MODEL_H_
#define FOLIO_WORKER_CUDA_HOST_MODEL_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/rope.h"

namespace folio::gpu {

// One decoder layer; sizes in the comments use this rank's counts.
struct HostLayer {
  std::span<const float> input_norm;           // [hidden]
  std::span<const float> qkv;                  // [(heads + 2 * kv_heads) * head_dim][hidden]
  std::span<const float> qkv_bias;             // same rows, or empty
  std::span<const float> o_proj;               // [hidden][heads * head_dim]
  std::span<const float> post_attention_norm;  // [hidden]
  std::span<const float> gate_up;              // [2 * intermediate][hidden]: gate, then up
  std::span<const float> down_proj;            // [hidden][intermediate]
  // > 0: the layer's attention sees only the last this many positions
  // (ModelConfig::AttentionWindow); 0: the whole context.
  int32_t sliding_window = 0;
};

struct HostModel {
  // --- Dimensions (this rank's shard where it says so).
  int32_t hidden = 0;
  int32_t intermediate = 0;  // this rank's MLP width
  int32_t num_heads = 0;     // this rank's query heads
  int32_t num_kv_heads = 0;  // this rank's KV heads
  int32_t head_dim = 0;
  int32_t vocab_size = 0;    // the full vocabulary
  // Vocabulary-parallel slice of embed / lm_head: rows
  // [vocab_begin, vocab_begin + vocab_count); vocab_padded is the largest
  // slice over the ranks (ShardShape in worker/model_weights.h).
  int32_t vocab_begin = 0;
  int32_t vocab_count = 0;
  int32_t vocab_padded = 0;
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  std::optional<kernels::cpu::RopeScalingParams> rope_scaling;
  int32_t max_position = 0;  // max_position_embeddings: the RoPE table's length
  bool qkv_bias = false;     // Qwen2: every layer has qkv_bias
  bool tied_embeddings = false;

  // --- Tensors (fp32, row-major).
  std::span<const float> embed;       // [vocab_count][hidden]
  std::vector<HostLayer> layers;
  std::span<const float> final_norm;  // [hidden]
  std::span<const float> lm_head;     // [vocab_count][hidden]; empty when tied

  int32_t num_layers() const { return static_cast<int32_t>(layers.size()); }
  int32_t q_width() const { return num_heads * head_dim; }
  int32_t kv_width() const { return num_kv_heads * head_dim; }
  int32_t qkv_width() const { return q_width() + 2 * kv_width(); }
  std::span<const float> lm_head_data() const { return tied_embeddings ? embed : lm_head; }

  // True when the dimensions are positive and consistent (heads a multiple
  // of kv_heads, head_dim even, vocab slice inside the vocabulary) and every
  // tensor has the size its layout needs. Otherwise false with a reason.
  bool Validate(std::string* error) const;
};

inline bool HostModel::Validate(std::string* error) const {
  auto fail = [&](const std::string& why) {
    if (error != nullptr) *error = "HostModel: " + why;
    return false;
  };
  if (hidden <= 0 || intermediate <= 0 || num_heads <= 0 || num_kv_heads <= 0 ||
      head_dim <= 0 || vocab_size <= 0 || vocab_count <= 0 || max_position <= 0) {
    return fail("dimensions must be positive");
  }
  if (num_heads % num_kv_heads != 0) return fail("num_heads must be a multiple of num_kv_heads");
  if (head_dim % 2 != 0) return fail("head_dim must be even");
  if (vocab_begin < 0 || int64_t{vocab_begin} + vocab_count > vocab_size) {
    return fail("vocab slice outside the vocabulary");
  }
  if (vocab_padded < vocab_count) return fail("vocab_padded < vocab_count");
  if (layers.empty()) return fail("no layers");
  auto check = [&](std::span<const float> t, int64_t want, const std::string& name) {
    if (static_cast<int64_t>(t.size()) == want && (want == 0 || t.data() != nullptr)) return true;
    if (error != nullptr) {
      *error = "HostModel: " + name + " has " + std::to_string(t.size()) +
               " elements, expected " + std::to_string(want);
    }
    return false;
  };
  const int64_t d = hidden;
  if (!check(embed, int64_t{vocab_count} * d, "embed")) return false;
  if (!check(final_norm, d, "final_norm")) return false;
  if (!tied_embeddings && !check(lm_head, int64_t{vocab_count} * d, "lm_head")) return false;
  for (size_t i = 0; i < layers.size(); ++i) {
    const HostLayer& L = layers[i];
    const std::string p = "layers[" + std::to_string(i) + "].";
    if (L.sliding_window < 0) return fail(p + "sliding_window must be >= 0");
    if (!check(L.input_norm, d, p + "input_norm") ||
        !check(L.qkv, int64_t{qkv_width()} * d, p + "qkv") ||
        !check(L.qkv_bias, qkv_bias ? qkv_width() : 0, p + "qkv_bias") ||
        !check(L.o_proj, d * q_width(), p + "o_proj") ||
        !check(L.post_attention_norm, d, p + "post_attention_norm") ||
        !check(L.gate_up, 2 * int64_t{intermediate} * d, p + "gate_up") ||
        !check(L.down_proj, d * intermediate, p + "down_proj")) {
      return false;
    }
  }
  std::string rope_error;
  if (!kernels::cpu::RotaryEmbedding::Validate(head_dim, rope_theta, rope_scaling, max_position,
                                               &rope_error)) {
    return fail("rope: " + rope_error);
  }
  return true;
}

}  // namespace folio::gpu

#endif  // FOLIO_WORKER_CUDA_HOST_MODEL_H_
