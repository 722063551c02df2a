#include "common/model_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json_text.h"
#include "common/text_file.h"
#include "nlohmann/json.hpp"

namespace folio {
namespace {

using json = nlohmann::json;

struct ArchInfo {
  const char* class_name;
  const char* model_type;
  ModelArchitecture arch;
  int32_t default_max_position_embeddings;  // transformers' config defaults
};

constexpr ArchInfo kArchs[] = {
    {"LlamaForCausalLM", "llama", ModelArchitecture::kLlama, 2048},
    {"MistralForCausalLM", "mistral", ModelArchitecture::kMistral, 4096 * 32},
    {"Qwen2ForCausalLM", "qwen2", ModelArchitecture::kQwen2, 32768},
};

// Typed access to the fields of one JSON object; every error names `source`
// and the field (with `prefix`, e.g. "rope_scaling.").
class Fields {
 public:
  Fields(const json& obj, std::string_view source, std::string prefix = "")
      : obj_(obj), source_(source), prefix_(std::move(prefix)) {}

  absl::Status Error(std::string_view field, std::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(std::string(source_), ": field '", prefix_,
                                                   std::string(field), "': ",
                                                   std::string(message)));
  }

  // nullptr when absent or null.
  bool Has(const char* field) const { return obj_.contains(field); }  // null included

  const json* Get(const char* field) const {
    auto it = obj_.find(field);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  absl::StatusOr<int32_t> IntValue(const char* field, const json& v) const {
    if (!v.is_number_integer()) {
      return Error(field, absl::StrCat("expected an integer, got ", JsonSnippet(v)));
    }
    if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t{INT32_MAX}
                               : (v.get<int64_t>() > INT32_MAX || v.get<int64_t>() < INT32_MIN)) {
      return Error(field, absl::StrCat("integer out of range: ", JsonSnippet(v)));
    }
    return static_cast<int32_t>(v.get<int64_t>());
  }

  absl::StatusOr<std::optional<int32_t>> OptionalInt(const char* field) const {
    const json* v = Get(field);
    if (v == nullptr) return std::optional<int32_t>();
    absl::StatusOr<int32_t> i = IntValue(field, *v);
    if (!i.ok()) return i.status();
    return std::optional<int32_t>(*i);
  }

  absl::StatusOr<int32_t> PositiveInt(const char* field, std::optional<int32_t> fallback) const {
    absl::StatusOr<std::optional<int32_t>> v = OptionalInt(field);
    if (!v.ok()) return v.status();
    if (!v->has_value()) {
      if (fallback.has_value()) return *fallback;
      return Error(field, "required but missing");
    }
    if (**v <= 0) return Error(field, absl::StrCat("must be positive, got ", **v));
    return **v;
  }

  absl::StatusOr<float> PositiveFloat(const char* field, float fallback) const {
    const json* v = Get(field);
    if (v == nullptr) return fallback;
    if (!v->is_number()) {
      return Error(field, absl::StrCat("expected a number, got ", JsonSnippet(*v)));
    }
    double d = v->get<double>();
    if (!(d > 0.0) || !std::isfinite(d) || d > std::numeric_limits<float>::max()) {
      return Error(field, absl::StrCat("must be a positive finite number, got ", JsonSnippet(*v)));
    }
    return static_cast<float>(d);
  }

  absl::StatusOr<bool> Bool(const char* field, bool fallback) const {
    const json* v = Get(field);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) {
      return Error(field, absl::StrCat("expected true or false, got ", JsonSnippet(*v)));
    }
    return v->get<bool>();
  }

  absl::StatusOr<std::optional<std::string>> OptionalString(const char* field) const {
    const json* v = Get(field);
    if (v == nullptr) return std::optional<std::string>();
    if (!v->is_string()) {
      return Error(field, absl::StrCat("expected a string, got ", JsonSnippet(*v)));
    }
    return std::optional<std::string>(v->get<std::string>());
  }

  absl::StatusOr<TokenId> TokenValue(const char* field, const json& v) const {
    absl::StatusOr<int32_t> id = IntValue(field, v);
    if (!id.ok()) return id.status();
    if (*id < 0) return Error(field, absl::StrCat("token id must be >= 0, got ", *id));
    return *id;
  }

 private:
  const json& obj_;
  std::string_view source_;
  std::string prefix_;
};

#define FOLIO_ASSIGN_OR_RETURN_CFG(lhs, expr) \
  do {                                        \
    auto _r = (expr);                         \
    if (!_r.ok()) return _r.status();         \
    lhs = *std::move(_r);                     \
  } while (0)

absl::Status ParseArchitecture(const Fields& f, ModelConfig& c) {
  std::vector<std::string> names;
  if (const json* archs = f.Get("architectures")) {
    if (!archs->is_array() || archs->empty()) {
      return f.Error("architectures", absl::StrCat("expected a non-empty list of strings, got ",
                                                   JsonSnippet(*archs)));
    }
    for (const json& a : *archs) {
      if (!a.is_string()) {
        return f.Error("architectures", absl::StrCat("expected strings, got ", JsonSnippet(a)));
      }
      names.push_back(a.get<std::string>());
      for (const ArchInfo& info : kArchs) {
        if (names.back() == info.class_name) {
          c.architecture = info.arch;
          c.architecture_name = info.class_name;
          return absl::OkStatus();
        }
      }
    }
    return f.Error("architectures",
                   absl::StrCat("unsupported architecture '", absl::StrJoin(names, "', '"),
                                "' (supported: LlamaForCausalLM, MistralForCausalLM, "
                                "Qwen2ForCausalLM)"));
  }
  std::optional<std::string> model_type;
  FOLIO_ASSIGN_OR_RETURN_CFG(model_type, f.OptionalString("model_type"));
  if (!model_type.has_value()) {
    return f.Error("architectures", "required but missing (and no model_type either)");
  }
  for (const ArchInfo& info : kArchs) {
    if (*model_type == info.model_type) {
      c.architecture = info.arch;
      c.architecture_name = info.class_name;
      return absl::OkStatus();
    }
  }
  return f.Error("model_type", absl::StrCat("unsupported architecture '", *model_type,
                                            "' (supported: llama, mistral, qwen2)"));
}

// transformers' MistralConfig / Qwen2Config default when `sliding_window` is
// not written at all.
constexpr int32_t kDefaultSlidingWindow = 4096;

// Qwen2's windowed layers (c.sliding_window set): `layer_types` when given,
// one "sliding_attention" or "full_attention" per layer; otherwise the
// layers from `max_window_layers` (transformers' default 28) on.
absl::Status ParseWindowedLayers(const Fields& f, ModelConfig& c) {
  if (const json* types = f.Get("layer_types")) {
    if (!types->is_array() || types->size() != static_cast<size_t>(c.num_layers)) {
      return f.Error("layer_types", absl::StrCat("expected a list of ", c.num_layers,
                                                 " layer types, got ", JsonSnippet(*types)));
    }
    c.sliding_window_layers.clear();
    for (const json& t : *types) {
      if (t == "sliding_attention" || t == "full_attention") {
        c.sliding_window_layers.push_back(t == "sliding_attention");
      } else {
        return f.Error("layer_types",
                       absl::StrCat("unsupported layer type ", JsonSnippet(t),
                                    " (supported: sliding_attention, full_attention)"));
      }
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::optional<int32_t>> first = f.OptionalInt("max_window_layers");
  if (!first.ok()) return first.status();
  const int32_t from = first->value_or(28);
  if (from < 0) return f.Error("max_window_layers", absl::StrCat("must be >= 0, got ", from));
  c.sliding_window_layers.assign(c.num_layers, false);
  for (int32_t layer = from; layer < c.num_layers; ++layer) c.sliding_window_layers[layer] = true;
  return absl::OkStatus();
}

// partial_rotary_factor (top level, or in v5's rope_parameters): only 1.
absl::Status CheckFullRotary(const Fields& f) {
  float partial;
  FOLIO_ASSIGN_OR_RETURN_CFG(partial, f.PositiveFloat("partial_rotary_factor", 1.0f));
  if (partial != 1.0f) {
    return f.Error("partial_rotary_factor",
                   absl::StrCat(partial, " is not supported (rotary embedding on every "
                                         "dimension only)"));
  }
  return absl::OkStatus();
}

// A yarn field transformers reads as `value or default`: absent, null and 0
// leave *value as it is; anything else must be a positive number.
absl::Status PositiveUnlessZero(const Fields& r, const char* field, float* value) {
  const json* v = r.Get(field);
  if (v == nullptr || (v->is_number() && v->get<double>() == 0.0)) return absl::OkStatus();
  FOLIO_ASSIGN_OR_RETURN_CFG(*value, r.PositiveFloat(field, *value));
  return absl::OkStatus();
}

// The context the scaled RoPE serves, as vLLM derives it (see MaxModelLen).
double ScaledContext(int32_t max_position_embeddings, const RopeScaling& s) {
  switch (s.type) {
    case RopeScalingType::kLinear:
      return static_cast<double>(max_position_embeddings) * s.factor;
    case RopeScalingType::kYarn:
      return static_cast<double>(s.original_max_position_embeddings) * s.factor;
    case RopeScalingType::kLlama3:
    case RopeScalingType::kDynamic:
      break;
  }
  return max_position_embeddings;
}

// transformers' yarn get_mscale.
double YarnMscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

absl::Status ParseYarn(const Fields& r, const ModelConfig& c, RopeScaling& s) {
  FOLIO_ASSIGN_OR_RETURN_CFG(s.original_max_position_embeddings,
                             r.PositiveInt("original_max_position_embeddings",
                                           c.max_position_embeddings));
  if (r.Get("factor") != nullptr) {
    FOLIO_ASSIGN_OR_RETURN_CFG(s.factor, r.PositiveFloat("factor", 1.0f));
  } else if (r.Get("original_max_position_embeddings") != nullptr) {
    // transformers: without a factor, the ratio of the two context lengths.
    s.factor = static_cast<float>(static_cast<double>(c.max_position_embeddings) /
                                  s.original_max_position_embeddings);
  } else {
    return r.Error("factor", "required but missing");
  }
  // transformers reads `beta_fast or 32`: null and 0 take the default.
  if (absl::Status st = PositiveUnlessZero(r, "beta_fast", &s.beta_fast); !st.ok()) return st;
  if (absl::Status st = PositiveUnlessZero(r, "beta_slow", &s.beta_slow); !st.ok()) return st;
  FOLIO_ASSIGN_OR_RETURN_CFG(s.truncate, r.Bool("truncate", true));
  if (r.Get("attention_factor") != nullptr) {
    FOLIO_ASSIGN_OR_RETURN_CFG(s.attention_factor, r.PositiveFloat("attention_factor", 1.0f));
    return absl::OkStatus();
  }
  // DeepSeek-style mscale / mscale_all_dim, else the paper's 0.1 ln(s) + 1.
  // (transformers tests `if mscale and mscale_all_dim`: 0 means unset.)
  float mscale = 0.0f, mscale_all_dim = 0.0f;
  if (absl::Status st = PositiveUnlessZero(r, "mscale", &mscale); !st.ok()) return st;
  if (absl::Status st = PositiveUnlessZero(r, "mscale_all_dim", &mscale_all_dim); !st.ok()) {
    return st;
  }
  const double f = s.factor;
  s.attention_factor = static_cast<float>(
      mscale > 0.0f && mscale_all_dim > 0.0f
          ? YarnMscale(f, mscale) / YarnMscale(f, mscale_all_dim)
          : YarnMscale(f, 1.0));
  return absl::OkStatus();
}

// rope_theta and the rope scaling: transformers v4's top-level `rope_theta`
// and `rope_scaling`, or v5's `rope_parameters` (rope_theta inside it).
absl::Status ParseRope(const json& root, std::string_view source, ModelConfig& c) {
  Fields f(root, source);
  FOLIO_ASSIGN_OR_RETURN_CFG(c.rope_theta, f.PositiveFloat("rope_theta", 10000.0f));
  const bool v5 = f.Get("rope_parameters") != nullptr;
  const char* key = v5 ? "rope_parameters" : "rope_scaling";
  const json* rs = f.Get(key);
  if (rs == nullptr) return absl::OkStatus();
  if (!rs->is_object()) {
    return f.Error(key, absl::StrCat("expected an object or null, got ", JsonSnippet(*rs)));
  }
  Fields r(*rs, source, absl::StrCat(key, "."));
  const char* type_field = rs->contains("rope_type") ? "rope_type" : "type";
  std::optional<std::string> type;
  FOLIO_ASSIGN_OR_RETURN_CFG(type, r.OptionalString(type_field));
  if (v5) {
    if (!type.has_value()) {
      // Per-layer-type parameters ({"full_attention": {...}, ...}): other
      // model families only.
      for (const auto& [name, value] : rs->items()) {
        if (value.is_object()) {
          return r.Error(name, "per-layer-type rope parameters are not supported");
        }
      }
    }
    FOLIO_ASSIGN_OR_RETURN_CFG(c.rope_theta, r.PositiveFloat("rope_theta", c.rope_theta));
    if (absl::Status st = CheckFullRotary(r); !st.ok()) return st;
    if (!type.has_value()) return absl::OkStatus();  // v5 standardizes it to "default"
  }
  if (!type.has_value()) return r.Error("rope_type", "required but missing");
  if (*type == "default") return absl::OkStatus();
  RopeScaling s;
  if (*type == "llama3") {
    // All four are required, as transformers and vLLM read them.
    for (const char* field : {"factor", "low_freq_factor", "high_freq_factor",
                              "original_max_position_embeddings"}) {
      if (r.Get(field) == nullptr) return r.Error(field, "required for llama3 but missing");
    }
    FOLIO_ASSIGN_OR_RETURN_CFG(s.factor, r.PositiveFloat("factor", s.factor));
    FOLIO_ASSIGN_OR_RETURN_CFG(s.low_freq_factor, r.PositiveFloat("low_freq_factor",
                                                                  s.low_freq_factor));
    FOLIO_ASSIGN_OR_RETURN_CFG(s.high_freq_factor, r.PositiveFloat("high_freq_factor",
                                                                   s.high_freq_factor));
    FOLIO_ASSIGN_OR_RETURN_CFG(s.original_max_position_embeddings,
                               r.PositiveInt("original_max_position_embeddings",
                                             s.original_max_position_embeddings));
    if (!(s.high_freq_factor > s.low_freq_factor)) {
      return r.Error("high_freq_factor",
                     absl::StrCat("must be greater than low_freq_factor (", s.low_freq_factor,
                                  "), got ", s.high_freq_factor));
    }
  } else if (*type == "linear" || *type == "dynamic") {
    s.type = *type == "linear" ? RopeScalingType::kLinear : RopeScalingType::kDynamic;
    if (r.Get("factor") == nullptr) return r.Error("factor", "required but missing");
    FOLIO_ASSIGN_OR_RETURN_CFG(s.factor, r.PositiveFloat("factor", 1.0f));
  } else if (*type == "yarn") {
    s.type = RopeScalingType::kYarn;
    if (absl::Status st = ParseYarn(r, c, s); !st.ok()) return st;
  } else {
    return r.Error(type_field, absl::StrCat("unsupported rope scaling type '", *type,
                                            "' (supported: llama3, linear, yarn, dynamic)"));
  }
  c.rope_scaling = s;
  const double max_len = ScaledContext(c.max_position_embeddings, s);
  if (max_len > INT32_MAX) {
    return r.Error("factor", absl::StrCat(s.factor, " makes the context ", max_len,
                                          " positions, more than folio serves"));
  }
  return absl::OkStatus();
}

absl::Status ParseTokens(const Fields& f, ModelConfig& c) {
  if (const json* bos = f.Get("bos_token_id")) {
    FOLIO_ASSIGN_OR_RETURN_CFG(c.bos_token_id, f.TokenValue("bos_token_id", *bos));
  }
  if (const json* eos = f.Get("eos_token_id")) {
    if (eos->is_array()) {
      for (const json& e : *eos) {
        TokenId id;
        FOLIO_ASSIGN_OR_RETURN_CFG(id, f.TokenValue("eos_token_id", e));
        c.eos_token_ids.push_back(id);
      }
    } else {
      TokenId id;
      FOLIO_ASSIGN_OR_RETURN_CFG(id, f.TokenValue("eos_token_id", *eos));
      c.eos_token_ids.push_back(id);
    }
  }
  return absl::OkStatus();
}

absl::Status ParseDType(const Fields& f, ModelConfig& c) {
  const char* field = f.Get("torch_dtype") != nullptr ? "torch_dtype" : "dtype";
  std::optional<std::string> name;
  FOLIO_ASSIGN_OR_RETURN_CFG(name, f.OptionalString(field));
  if (!name.has_value()) {
    c.torch_dtype = DType::kF32;  // transformers' default
  } else if (*name == "float32" || *name == "float") {
    c.torch_dtype = DType::kF32;
  } else if (*name == "float16" || *name == "half") {
    c.torch_dtype = DType::kF16;
  } else if (*name == "bfloat16") {
    c.torch_dtype = DType::kBF16;
  } else {
    return f.Error(field, absl::StrCat("unsupported dtype '", *name,
                                       "' (supported: float32, float16, bfloat16)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> ParseObject(const json& root, std::string_view source) {
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(source), ": expected a JSON object, got ", JsonSnippet(root)));
  }
  Fields f(root, source);
  ModelConfig c;
  if (absl::Status s = ParseArchitecture(f, c); !s.ok()) return s;
  const ArchInfo* info = nullptr;
  for (const ArchInfo& a : kArchs) {
    if (a.arch == c.architecture) info = &a;
  }

  FOLIO_ASSIGN_OR_RETURN_CFG(c.hidden_size, f.PositiveInt("hidden_size", std::nullopt));
  FOLIO_ASSIGN_OR_RETURN_CFG(c.intermediate_size, f.PositiveInt("intermediate_size", std::nullopt));
  FOLIO_ASSIGN_OR_RETURN_CFG(c.num_layers, f.PositiveInt("num_hidden_layers", std::nullopt));
  FOLIO_ASSIGN_OR_RETURN_CFG(c.num_heads, f.PositiveInt("num_attention_heads", std::nullopt));
  FOLIO_ASSIGN_OR_RETURN_CFG(c.num_kv_heads, f.PositiveInt("num_key_value_heads", c.num_heads));
  if (c.num_heads % c.num_kv_heads != 0) {
    return f.Error("num_key_value_heads",
                   absl::StrCat(c.num_kv_heads, " does not divide num_attention_heads ",
                                c.num_heads));
  }
  if (f.Get("head_dim") != nullptr) {
    FOLIO_ASSIGN_OR_RETURN_CFG(c.head_dim, f.PositiveInt("head_dim", std::nullopt));
  } else {
    if (c.hidden_size % c.num_heads != 0) {
      return f.Error("hidden_size",
                     absl::StrCat(c.hidden_size, " is not divisible by num_attention_heads ",
                                  c.num_heads, " (and no head_dim is given)"));
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) {
    return f.Error("head_dim", absl::StrCat("must be even for RoPE, got ", c.head_dim));
  }
  FOLIO_ASSIGN_OR_RETURN_CFG(c.vocab_size, f.PositiveInt("vocab_size", std::nullopt));
  FOLIO_ASSIGN_OR_RETURN_CFG(c.max_position_embeddings,
                             f.PositiveInt("max_position_embeddings",
                                           info->default_max_position_embeddings));
  FOLIO_ASSIGN_OR_RETURN_CFG(c.rms_norm_eps, f.PositiveFloat("rms_norm_eps", 1e-6f));
  FOLIO_ASSIGN_OR_RETURN_CFG(c.tie_word_embeddings, f.Bool("tie_word_embeddings", false));
  if (absl::Status s = ParseRope(root, source, c); !s.ok()) return s;

  std::optional<std::string> act;
  FOLIO_ASSIGN_OR_RETURN_CFG(act, f.OptionalString("hidden_act"));
  // transformers' "swish" is the same function as "silu".
  if (act.has_value() && *act != "silu" && *act != "swish") {
    return f.Error("hidden_act", absl::StrCat("unsupported activation '", *act,
                                              "' (supported: silu)"));
  }
  // Fields that would change the math and that folio does not implement:
  // refused here, by name, rather than ignored (or failing later on a weight).
  if (f.Has("quantization_config") && f.Get("quantization_config") != nullptr) {
    return f.Error("quantization_config",
                   "quantized checkpoints are not supported (use the unquantized weights)");
  }
  if (absl::Status st = CheckFullRotary(f); !st.ok()) return st;

  switch (c.architecture) {
    case ModelArchitecture::kQwen2: {
      c.qkv_bias = true;
      bool use_sw;
      FOLIO_ASSIGN_OR_RETURN_CFG(use_sw, f.Bool("use_sliding_window", false));
      if (use_sw && (!f.Has("sliding_window") || f.Get("sliding_window") != nullptr)) {
        int32_t sw;  // absent: transformers' default; null: no window
        FOLIO_ASSIGN_OR_RETURN_CFG(sw, f.PositiveInt("sliding_window", kDefaultSlidingWindow));
        c.sliding_window = sw;
        if (absl::Status s = ParseWindowedLayers(f, c); !s.ok()) return s;
      }
      break;
    }
    case ModelArchitecture::kMistral: {
      if (!f.Has("sliding_window") || f.Get("sliding_window") != nullptr) {
        int32_t sw;  // absent: transformers' default; null (Mistral v0.2+): no window
        FOLIO_ASSIGN_OR_RETURN_CFG(sw, f.PositiveInt("sliding_window", kDefaultSlidingWindow));
        c.sliding_window = sw;
        c.sliding_window_layers.assign(c.num_layers, true);
      }
      break;
    }
    case ModelArchitecture::kLlama: {
      for (const char* field : {"attention_bias", "mlp_bias"}) {
        bool bias;
        FOLIO_ASSIGN_OR_RETURN_CFG(bias, f.Bool(field, false));
        if (bias) return f.Error(field, "true is not supported");
      }
      break;
    }
  }

  if (absl::Status s = ParseTokens(f, c); !s.ok()) return s;
  if (absl::Status s = ParseDType(f, c); !s.ok()) return s;
  return c;
}

#undef FOLIO_ASSIGN_OR_RETURN_CFG

}  // namespace

absl::StatusOr<ModelConfig> ModelConfig::Parse(std::string_view json_text,
                                               std::string_view source) {
  try {
    json root = json::parse(json_text.begin(), json_text.end());
    return ParseObject(root, source);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(source), ": invalid JSON: ", e.what()));
  }
}

int32_t ModelConfig::AttentionWindow(int32_t layer) const {
  if (!sliding_window.has_value() || layer < 0 ||
      layer >= static_cast<int32_t>(sliding_window_layers.size()) ||
      !sliding_window_layers[layer]) {
    return 0;
  }
  return *sliding_window;
}

int32_t ModelConfig::CacheWindow() const {
  int32_t widest = 0;
  for (int32_t layer = 0; layer < num_layers; ++layer) {
    const int32_t window = AttentionWindow(layer);
    if (window == 0) return 0;
    widest = std::max(widest, window);
  }
  return widest;
}

int32_t ModelConfig::MaxModelLen() const {
  if (!rope_scaling.has_value()) return max_position_embeddings;
  const double len = ScaledContext(max_position_embeddings, *rope_scaling);
  // Rounded: a factor derived as max_position_embeddings / original (float)
  // must give max_position_embeddings back.
  return static_cast<int32_t>(std::clamp(std::round(len), 1.0, double{INT32_MAX}));
}

absl::StatusOr<ModelConfig> ModelConfig::LoadFromDirectory(const std::string& model_dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(model_dir, ec)) {
    return absl::NotFoundError(absl::StrCat("model directory not found: ", model_dir));
  }
  const std::string path = (std::filesystem::path(model_dir) / "config.json").string();
  absl::StatusOr<std::string> text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<ModelConfig> c = Parse(*text, path);
  if (!c.ok()) return c.status();
  const std::string gen = (std::filesystem::path(model_dir) / "generation_config.json").string();
  if (!std::filesystem::exists(gen, ec)) return c;
  absl::StatusOr<std::string> gen_text = ReadTextFile(gen);
  if (!gen_text.ok()) return gen_text.status();
  if (absl::Status s = MergeGenerationConfig(*gen_text, gen, *c); !s.ok()) return s;
  return c;
}

absl::Status ModelConfig::MergeGenerationConfig(std::string_view json_text,
                                                std::string_view source, ModelConfig& c) {
  try {
    const json root = json::parse(json_text.begin(), json_text.end());
    if (!root.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(source), ": expected a JSON object"));
    }
    ModelConfig gen;
    if (absl::Status s = ParseTokens(Fields(root, source), gen); !s.ok()) return s;
    for (TokenId id : gen.eos_token_ids) {
      if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end()) {
        c.eos_token_ids.push_back(id);
      }
    }
    return absl::OkStatus();
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(source), ": invalid JSON: ", e.what()));
  }
}

}  // namespace folio
