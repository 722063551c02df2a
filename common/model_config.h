#ifndef FOLIO_COMMON_MODEL_CONFIG_H_
#define FOLIO_COMMON_MODEL_CONFIG_H_

// The shape and hyper-parameters of a Llama-family model, read from a Hugging
// Face `config.json`. Supported: LlamaForCausalLM (Llama 2 / 3 / 3.1+),
// MistralForCausalLM and Qwen2ForCausalLM, all SwiGLU + RMSNorm + RoPE.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "common/types.h"

namespace folio {

enum class ModelArchitecture { kLlama, kMistral, kQwen2 };

// RoPE scaling (config.json's `rope_scaling`, or transformers v5's
// `rope_parameters`): Llama 3.1's frequency-dependent "llama3", "linear"
// (position interpolation), "yarn" and "dynamic" (NTK). Unset fields hold
// transformers' defaults; the yarn attention factor is resolved from mscale /
// mscale_all_dim / the factor as transformers does. Dynamic NTK changes
// nothing within max_position_embeddings in transformers (its base grows
// only past it), so folio serves such models up to there with the plain
// frequencies: exactly transformers' output, where vLLM would stretch both.
enum class RopeScalingType { kLlama3, kLinear, kYarn, kDynamic };
struct RopeScaling {
  RopeScalingType type = RopeScalingType::kLlama3;
  float factor = 8.0f;
  float low_freq_factor = 1.0f;                     // llama3
  float high_freq_factor = 4.0f;                    // llama3
  int32_t original_max_position_embeddings = 8192;  // llama3, yarn
  float beta_fast = 32.0f;                          // yarn
  float beta_slow = 1.0f;                           // yarn
  bool truncate = true;                             // yarn
  float attention_factor = 1.0f;                    // yarn: scales cos and sin
};

// A plain value; copyable. Every field is validated by Parse: the sizes are
// positive, num_heads % num_kv_heads == 0, head_dim is even.
struct ModelConfig {
  ModelArchitecture architecture = ModelArchitecture::kLlama;
  std::string architecture_name;  // as written, e.g. "LlamaForCausalLM"

  int32_t hidden_size = 0;
  int32_t intermediate_size = 0;
  int32_t num_layers = 0;    // num_hidden_layers
  int32_t num_heads = 0;     // num_attention_heads (query heads)
  int32_t num_kv_heads = 0;  // num_key_value_heads; defaults to num_heads
  int32_t head_dim = 0;      // defaults to hidden_size / num_heads

  float rms_norm_eps = 1e-6f;
  // `rope_theta`, or rope_parameters.rope_theta (transformers v5).
  float rope_theta = 10000.0f;
  std::optional<RopeScaling> rope_scaling;  // absent, null or type "default": none

  int32_t max_position_embeddings = 0;
  int32_t vocab_size = 0;
  bool tie_word_embeddings = false;  // lm_head shares embed_tokens' weight

  bool qkv_bias = false;  // q/k/v projections have biases (Qwen2)
  // Sliding-window attention: Mistral's `sliding_window` (null -> none,
  // absent -> 4096 as in transformers), on every layer; Qwen2's (same
  // defaults) only when its `use_sliding_window` is true, on the
  // layers `layer_types` marks "sliding_attention", or when that is absent
  // on layers >= `max_window_layers` (default 28), as in transformers.
  std::optional<int32_t> sliding_window;
  std::vector<bool> sliding_window_layers;  // [num_layers] when sliding_window is set

  std::optional<TokenId> bos_token_id;
  // `eos_token_id` (an int or a list), with generation_config.json's added
  // when the directory has one: Llama 3 Instruct ends a turn with
  // <|eot_id|> there, and vLLM / transformers' generate stop on it too.
  std::vector<TokenId> eos_token_ids;

  DType torch_dtype = DType::kF32;  // `torch_dtype` (or newer `dtype`); absent -> F32

  // The attention window of `layer`: sliding_window on a windowed layer, 0
  // (the whole context) otherwise.
  int32_t AttentionWindow(int32_t layer) const;
  // The window of the KV cache as a whole: the largest AttentionWindow when
  // every layer has one (older positions are read by no layer), else 0.
  int32_t CacheWindow() const;
  // The longest context the model serves, as vLLM derives it:
  // max_position_embeddings, times the factor of linear rope scaling; for
  // yarn, original_max_position_embeddings times the factor (dynamic NTK:
  // max_position_embeddings, see RopeScalingType).
  int32_t MaxModelLen() const;

  // Adds the end tokens of a generation_config.json (text) to c.eos_token_ids.
  // INVALID_ARGUMENT naming `source` for bad JSON or a bad eos_token_id.
  static absl::Status MergeGenerationConfig(std::string_view json_text, std::string_view source,
                                            ModelConfig& c);

  // Reads and parses `<model_dir>/config.json` (and generation_config.json's
  // end tokens, when present). NOT_FOUND naming the path if
  // it cannot be read; otherwise as Parse.
  static absl::StatusOr<ModelConfig> LoadFromDirectory(const std::string& model_dir);

  // Parses config.json text. Errors are INVALID_ARGUMENT and name `source`
  // (usually the file path) and the offending field, e.g.
  //   "/m/config.json: field 'num_key_value_heads': 3 does not divide num_attention_heads 32".
  // Required: architectures (or model_type), hidden_size, intermediate_size,
  // num_hidden_layers, num_attention_heads, vocab_size. Everything else has
  // the Hugging Face default for the architecture. Rejected as unsupported:
  // other architectures, rope scaling types other than llama3, linear, yarn and
  // dynamic (longrope), per-layer-type rope_parameters, dtypes other
  // than float32/float16/bfloat16, hidden_act other than silu, and Llama's
  // attention_bias / mlp_bias (they would add biases we do not load).
  static absl::StatusOr<ModelConfig> Parse(std::string_view json_text, std::string_view source);
};

}  // namespace folio

#endif  // FOLIO_COMMON_MODEL_CONFIG_H_
