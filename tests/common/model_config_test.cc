#include "common/model_config.h"

#include <cmath>
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/safetensors_writer.h"

namespace folio {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

// Meta-Llama-3.1-8B-Instruct's config.json.
constexpr char kLlama31[] = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.42.3", "use_cache": true, "vocab_size": 128256})";

// Llama-3.2-1B: tied embeddings, explicit head_dim, other rope factors.
constexpr char kLlama32_1B[] = R"({
  "architectures": ["LlamaForCausalLM"], "bos_token_id": 128000, "eos_token_id": 128001,
  "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "model_type": "llama", "num_attention_heads": 32,
  "num_hidden_layers": 16, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "vocab_size": 128256})";

// Mistral-7B-v0.1.
constexpr char kMistral[] = R"({
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 32000})";

// Qwen2.5-0.5B-Instruct.
constexpr char kQwen2[] = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896,
  "initializer_range": 0.02, "intermediate_size": 4864, "max_position_embeddings": 32768,
  "max_window_layers": 21, "model_type": "qwen2", "num_attention_heads": 14,
  "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "use_cache": true, "use_sliding_window": false,
  "vocab_size": 151936})";

// Only the required fields.
constexpr char kMinimal[] = R"({
  "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 172,
  "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 512})";

ModelConfig MustParse(std::string_view text) {
  absl::StatusOr<ModelConfig> c = ModelConfig::Parse(text, "test/config.json");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : ModelConfig{};
}

TEST(ModelConfigTest, Llama31) {
  ModelConfig c = MustParse(kLlama31);
  EXPECT_EQ(c.architecture, ModelArchitecture::kLlama);
  EXPECT_EQ(c.architecture_name, "LlamaForCausalLM");
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_FLOAT_EQ(c.rope_scaling->factor, 8.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling->low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling->high_freq_factor, 4.0f);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.sliding_window.has_value());
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_THAT(c.eos_token_ids, ElementsAre(128001, 128008, 128009));
  EXPECT_EQ(c.torch_dtype, DType::kBF16);
}

TEST(ModelConfigTest, Llama32TiedWithExplicitHeadDim) {
  ModelConfig c = MustParse(kLlama32_1B);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_layers, 16);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_FLOAT_EQ(c.rope_scaling->factor, 32.0f);
  EXPECT_THAT(c.eos_token_ids, ElementsAre(128001));  // a single int
}

TEST(ModelConfigTest, Mistral) {
  ModelConfig c = MustParse(kMistral);
  EXPECT_EQ(c.architecture, ModelArchitecture::kMistral);
  EXPECT_EQ(c.architecture_name, "MistralForCausalLM");
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_THAT(c.eos_token_ids, ElementsAre(2));
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_FALSE(c.qkv_bias);

  // Mistral v0.2+ writes "sliding_window": null.
  json j = json::parse(kMistral);
  j["sliding_window"] = nullptr;
  EXPECT_FALSE(MustParse(j.dump()).sliding_window.has_value());
}

TEST(ModelConfigTest, Qwen2) {
  ModelConfig c = MustParse(kQwen2);
  EXPECT_EQ(c.architecture, ModelArchitecture::kQwen2);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.num_heads, 14);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-6f);
  // sliding_window is written but off (use_sliding_window false).
  EXPECT_FALSE(c.sliding_window.has_value());
  json j = json::parse(kQwen2);
  j["use_sliding_window"] = true;
  EXPECT_EQ(MustParse(j.dump()).sliding_window, 32768);
}

// Which layers attend through the window, as transformers decides it.
TEST(ModelConfigTest, SlidingWindowLayers) {
  // Mistral: every layer.
  ModelConfig m = MustParse(kMistral);
  EXPECT_EQ(m.AttentionWindow(0), 4096);
  EXPECT_EQ(m.AttentionWindow(m.num_layers - 1), 4096);
  json j = json::parse(kMistral);
  j.erase("sliding_window");  // absent: transformers' default
  EXPECT_EQ(MustParse(j.dump()).sliding_window, 4096);

  // Qwen2 (24 layers): from max_window_layers (21) on; none when off.
  EXPECT_EQ(MustParse(kQwen2).AttentionWindow(23), 0);
  EXPECT_EQ(MustParse(kQwen2).AttentionWindow(0), 0);
  json q = json::parse(kQwen2);
  q["use_sliding_window"] = true;
  q["sliding_window"] = 64;
  ModelConfig c = MustParse(q.dump());
  EXPECT_EQ(c.AttentionWindow(20), 0);
  EXPECT_EQ(c.AttentionWindow(21), 64);
  EXPECT_EQ(c.AttentionWindow(23), 64);
  EXPECT_EQ(c.AttentionWindow(24), 0);  // no such layer
  q["max_window_layers"] = 24;  // no layer left
  EXPECT_EQ(MustParse(q.dump()).AttentionWindow(23), 0);

  // An explicit layer_types list decides instead.
  std::vector<std::string> types(24, "full_attention");
  types[3] = "sliding_attention";
  q["layer_types"] = types;
  c = MustParse(q.dump());
  EXPECT_EQ(c.AttentionWindow(3), 64);
  EXPECT_EQ(c.AttentionWindow(23), 0);
  types[5] = "chunked_attention";
  q["layer_types"] = types;
  absl::StatusOr<ModelConfig> bad = ModelConfig::Parse(q.dump(), "cfg");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("'layer_types'"));
  q["layer_types"] = std::vector<std::string>(3, "full_attention");  // wrong length
  EXPECT_FALSE(ModelConfig::Parse(q.dump(), "cfg").ok());
}

TEST(ModelConfigTest, Defaults) {
  ModelConfig c = MustParse(kMinimal);
  EXPECT_EQ(c.num_kv_heads, 4);   // = num_attention_heads
  EXPECT_EQ(c.head_dim, 16);      // = hidden_size / num_attention_heads
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-6f);
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.bos_token_id.has_value());
  EXPECT_TRUE(c.eos_token_ids.empty());
  EXPECT_EQ(c.torch_dtype, DType::kF32);
}

TEST(ModelConfigTest, AlternativeSpellings) {
  json j = json::parse(kMinimal);
  j.erase("architectures");
  j["model_type"] = "qwen2";                       // no architectures: model_type
  j["dtype"] = "float16";                          // newer transformers' key
  j["rope_scaling"] = {{"type", "default"}};       // old key, no scaling
  j["head_dim"] = nullptr;                         // null = absent
  j["bos_token_id"] = nullptr;
  j["eos_token_id"] = nullptr;
  ModelConfig c = MustParse(j.dump());
  EXPECT_EQ(c.architecture, ModelArchitecture::kQwen2);
  EXPECT_EQ(c.architecture_name, "Qwen2ForCausalLM");
  EXPECT_EQ(c.torch_dtype, DType::kF16);
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.max_position_embeddings, 32768);
  EXPECT_FALSE(c.bos_token_id.has_value());

  j = json::parse(kMinimal);
  j["architectures"] = {"SomethingElse", "MistralForCausalLM"};  // first supported wins
  j["rope_scaling"] = {{"type", "llama3"}, {"factor", 4}, {"low_freq_factor", 1},  // old key
                       {"high_freq_factor", 2}, {"original_max_position_embeddings", 1024}};
  c = MustParse(j.dump());
  EXPECT_EQ(c.architecture, ModelArchitecture::kMistral);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_FLOAT_EQ(c.rope_scaling->factor, 4.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling->high_freq_factor, 2.0f);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 1024);
}

// transformers v5 writes rope_theta and the scaling into rope_parameters;
// a top-level rope_theta, if any, loses to the one inside.
TEST(ModelConfigTest, ReadsTransformersV5RopeParameters) {
  json j = json::parse(kLlama31);
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 32.0},
                          {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                          {"original_max_position_embeddings", 8192}};
  ModelConfig c = MustParse(j.dump());
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->type, RopeScalingType::kLlama3);
  EXPECT_FLOAT_EQ(c.rope_scaling->factor, 32.0f);
  EXPECT_EQ(c.MaxModelLen(), 131072);  // llama3 does not stretch the context

  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000.0}};
  j["rope_theta"] = 10000.0;
  c = MustParse(j.dump());
  EXPECT_FLOAT_EQ(c.rope_theta, 1000000.0f);
  EXPECT_FALSE(c.rope_scaling.has_value());

  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_theta", 250000.0}};  // no rope_type: default
  c = MustParse(j.dump());
  EXPECT_FLOAT_EQ(c.rope_theta, 250000.0f);
  EXPECT_FALSE(c.rope_scaling.has_value());

  j["rope_parameters"] = nullptr;  // null: the v4 fields (none here) apply
  c = MustParse(j.dump());
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
  EXPECT_FALSE(c.rope_scaling.has_value());
}

TEST(ModelConfigTest, LinearRopeScalingStretchesTheContext) {
  json j = json::parse(kMinimal);
  j["max_position_embeddings"] = 4096;
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  ModelConfig c = MustParse(j.dump());
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->type, RopeScalingType::kLinear);
  EXPECT_FLOAT_EQ(c.rope_scaling->factor, 4.0f);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_EQ(c.MaxModelLen(), 16384);
}

// Dynamic NTK: transformers scales nothing within max_position_embeddings,
// which is as far as folio serves it.
TEST(ModelConfigTest, DynamicRopeScalingKeepsTheContext) {
  json j = json::parse(kMinimal);
  j["max_position_embeddings"] = 4096;
  j["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
  ModelConfig c = MustParse(j.dump());
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->type, RopeScalingType::kDynamic);
  EXPECT_FLOAT_EQ(c.rope_scaling->factor, 2.0f);
  EXPECT_EQ(c.MaxModelLen(), 4096);
}

// Qwen2.5's recipe for 128k contexts, as its model card gives it.
TEST(ModelConfigTest, YarnAsQwenDocumentsIt) {
  json j = json::parse(kQwen2);
  j["rope_scaling"] = {{"factor", 4.0}, {"original_max_position_embeddings", 32768},
                       {"type", "yarn"}};
  ModelConfig c = MustParse(j.dump());
  ASSERT_TRUE(c.rope_scaling.has_value());
  const RopeScaling& s = *c.rope_scaling;
  EXPECT_EQ(s.type, RopeScalingType::kYarn);
  EXPECT_FLOAT_EQ(s.factor, 4.0f);
  EXPECT_EQ(s.original_max_position_embeddings, 32768);
  EXPECT_FLOAT_EQ(s.beta_fast, 32.0f);
  EXPECT_FLOAT_EQ(s.beta_slow, 1.0f);
  EXPECT_TRUE(s.truncate);
  EXPECT_NEAR(s.attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-6);
  EXPECT_EQ(c.MaxModelLen(), 131072);  // 32768 x 4, as vLLM serves it
}

TEST(ModelConfigTest, YarnOptions) {
  json j = json::parse(kMinimal);
  j["max_position_embeddings"] = 163840;
  // DeepSeek V3's: the attention factor from mscale / mscale_all_dim.
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 40}, {"beta_fast", 32}, {"beta_slow", 1},
                       {"mscale", 1.0}, {"mscale_all_dim", 0.5},
                       {"original_max_position_embeddings", 4096}};
  ModelConfig c = MustParse(j.dump());
  ASSERT_TRUE(c.rope_scaling.has_value());
  const double m = 0.1 * std::log(40.0);
  EXPECT_NEAR(c.rope_scaling->attention_factor, (m + 1.0) / (0.5 * m + 1.0), 1e-6);
  EXPECT_EQ(c.MaxModelLen(), 163840);

  // An explicit attention_factor wins; null / 0 betas take the defaults;
  // no factor: max_position_embeddings / original_max_position_embeddings.
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"attention_factor", 0.75}, {"beta_fast", nullptr},
                       {"beta_slow", 0}, {"truncate", false},
                       {"original_max_position_embeddings", 40960}};
  c = MustParse(j.dump());
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_FLOAT_EQ(c.rope_scaling->factor, 4.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling->attention_factor, 0.75f);
  EXPECT_FLOAT_EQ(c.rope_scaling->beta_fast, 32.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling->beta_slow, 1.0f);
  EXPECT_FALSE(c.rope_scaling->truncate);
  EXPECT_EQ(c.MaxModelLen(), 163840);

  // mscale 0 is unset (transformers: `if mscale and mscale_all_dim`).
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"mscale", 0},
                       {"mscale_all_dim", 1.0}};
  c = MustParse(j.dump());
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_NEAR(c.rope_scaling->attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-6);

  // A derived factor that float cannot hold exactly still gives the context back.
  j["max_position_embeddings"] = 131072;
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"original_max_position_embeddings", 3000}};
  c = MustParse(j.dump());
  EXPECT_EQ(c.MaxModelLen(), 131072);
  j["max_position_embeddings"] = 163840;

  // No original_max_position_embeddings: max_position_embeddings is it.
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 2.0}};
  c = MustParse(j.dump());
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 163840);
  EXPECT_EQ(c.MaxModelLen(), 327680);
}

struct ErrorCase {
  const char* label;
  const char* patch;     // RFC 7386 merge patch onto kLlama31 (null deletes a field)
  const char* contains;  // the message must name this field (and more)
};

class ModelConfigErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ModelConfigErrorTest, NamesSourceAndField) {
  json j = json::parse(kLlama31);
  j.merge_patch(json::parse(GetParam().patch));
  absl::StatusOr<ModelConfig> c = ModelConfig::Parse(j.dump(), "/models/x/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("/models/x/config.json"));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr(GetParam().contains));
}

INSTANTIATE_TEST_SUITE_P(
    All, ModelConfigErrorTest,
    ::testing::Values(
        ErrorCase{"missing_hidden", R"({"hidden_size": null})", "'hidden_size': required"},
        ErrorCase{"zero_hidden", R"({"hidden_size": 0})", "'hidden_size': must be positive"},
        ErrorCase{"negative_layers", R"({"num_hidden_layers": -2})", "'num_hidden_layers'"},
        ErrorCase{"string_heads", R"({"num_attention_heads": "32"})",
                  "'num_attention_heads': expected an integer"},
        ErrorCase{"float_vocab", R"({"vocab_size": 1.5})", "'vocab_size'"},
        ErrorCase{"huge_inter", R"({"intermediate_size": 4294967296})",
                  "'intermediate_size': integer out of range"},
        ErrorCase{"missing_vocab", R"({"vocab_size": null})", "'vocab_size': required"},
        ErrorCase{"kv_not_divisor", R"({"num_key_value_heads": 6})",
                  "'num_key_value_heads': 6 does not divide num_attention_heads 32"},
        ErrorCase{"hidden_not_divisible", R"({"hidden_size": 4100})",
                  "'hidden_size': 4100 is not divisible by num_attention_heads 32"},
        ErrorCase{"odd_head_dim", R"({"head_dim": 127})", "'head_dim': must be even"},
        ErrorCase{"bad_arch", R"({"architectures": ["GPT2LMHeadModel"]})",
                  "unsupported architecture 'GPT2LMHeadModel'"},
        ErrorCase{"arch_not_list", R"({"architectures": "LlamaForCausalLM"})",
                  "'architectures'"},
        ErrorCase{"no_arch", R"({"architectures": null, "model_type": null})",
                  "'architectures': required"},
        ErrorCase{"bad_model_type", R"({"architectures": null, "model_type": "gemma"})",
                  "'model_type': unsupported architecture 'gemma'"},
        ErrorCase{"rope_llama3_incomplete", R"({"rope_scaling": {"low_freq_factor": null}})",
                  "'rope_scaling.low_freq_factor': required for llama3 but missing"},
        ErrorCase{"rope_longrope", R"({"rope_scaling": {"rope_type": "longrope"}})",
                  "'rope_scaling.rope_type': unsupported rope scaling type 'longrope' "
                  "(supported: llama3, linear, yarn, dynamic)"},
        ErrorCase{"rope_dynamic_no_factor", R"({"rope_scaling": {"rope_type": "dynamic",
                  "factor": null}})", "'rope_scaling.factor': required"},
        ErrorCase{"rope_longrope_old_key",
                  R"({"rope_scaling": {"rope_type": null, "type": "longrope"}})",
                  "'rope_scaling.type': unsupported rope scaling type 'longrope'"},
        ErrorCase{"rope_linear_no_factor", R"({"rope_scaling": {"rope_type": "linear",
                  "factor": null}})", "'rope_scaling.factor': required"},
        ErrorCase{"rope_yarn_no_factor", R"({"rope_scaling": {"rope_type": "yarn",
                  "factor": null, "original_max_position_embeddings": null}})",
                  "'rope_scaling.factor': required"},
        ErrorCase{"rope_yarn_bad_beta", R"({"rope_scaling": {"rope_type": "yarn",
                  "beta_fast": -3}})", "'rope_scaling.beta_fast'"},
        ErrorCase{"rope_yarn_bad_truncate", R"({"rope_scaling": {"rope_type": "yarn",
                  "truncate": "no"}})", "'rope_scaling.truncate'"},
        ErrorCase{"rope_yarn_huge", R"({"rope_scaling": {"rope_type": "yarn",
                  "factor": 1e9}})", "'rope_scaling.factor'"},
        ErrorCase{"rope_params_not_object", R"({"rope_parameters": [1]})",
                  "'rope_parameters': expected an object"},
        ErrorCase{"rope_params_per_layer", R"({"rope_parameters":
                  {"full_attention": {"rope_type": "default", "rope_theta": 1e6}}})",
                  "'rope_parameters.full_attention': per-layer-type rope parameters"},
        ErrorCase{"rope_params_bad_theta", R"({"rope_parameters": {"rope_type": "default",
                  "rope_theta": -1}})", "'rope_parameters.rope_theta'"},
        ErrorCase{"rope_params_partial", R"({"rope_parameters": {"rope_type": "default",
                  "partial_rotary_factor": 0.25}})",
                  "'rope_parameters.partial_rotary_factor': 0.25 is not supported"},
        ErrorCase{"rope_params_su", R"({"rope_parameters": {"rope_type": "su",
                  "factor": 2}})", "'rope_parameters.rope_type': unsupported"},
        ErrorCase{"rope_not_object", R"({"rope_scaling": 8})", "'rope_scaling'"},
        ErrorCase{"rope_bad_factor", R"({"rope_scaling": {"factor": -1}})",
                  "'rope_scaling.factor'"},
        ErrorCase{"rope_freq_order", R"({"rope_scaling": {"high_freq_factor": 0.5}})",
                  "'rope_scaling.high_freq_factor': must be greater than low_freq_factor"},
        ErrorCase{"rope_no_type", R"({"rope_scaling": {"rope_type": null}})",
                  "'rope_scaling.rope_type': required"},
        ErrorCase{"bad_dtype", R"({"torch_dtype": "float8_e4m3fn"})",
                  "'torch_dtype': unsupported dtype 'float8_e4m3fn'"},
        ErrorCase{"bad_eps", R"({"rms_norm_eps": 0})", "'rms_norm_eps'"},
        ErrorCase{"bad_theta", R"({"rope_theta": "big"})", "'rope_theta': expected a number"},
        ErrorCase{"bad_tie", R"({"tie_word_embeddings": 1})", "'tie_word_embeddings'"},
        ErrorCase{"gelu", R"({"hidden_act": "gelu"})", "'hidden_act': unsupported activation"},
        ErrorCase{"attention_bias", R"({"attention_bias": true})",
                  "'attention_bias': true is not supported"},
        ErrorCase{"mlp_bias", R"({"mlp_bias": true})", "'mlp_bias'"},
        ErrorCase{"quantized",
                  R"({"quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}})",
                  "'quantization_config': quantized checkpoints are not supported"},
        ErrorCase{"partial_rotary", R"({"partial_rotary_factor": 0.5})",
                  "'partial_rotary_factor': 0.5 is not supported"},
        ErrorCase{"eos_string", R"({"eos_token_id": [128001, "x"]})", "'eos_token_id'"},
        ErrorCase{"eos_negative", R"({"eos_token_id": -1})", "'eos_token_id': token id"},
        ErrorCase{"bos_list", R"({"bos_token_id": [1]})", "'bos_token_id'"}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return info.param.label; });

// Spellings of what folio does implement are accepted: "swish" is silu,
// a partial_rotary_factor of 1 or null is the full rotary embedding, a null
// quantization_config is none.
TEST(ModelConfigTest, AcceptsEquivalentSpellings) {
  json j = json::parse(kMistral);
  j["hidden_act"] = "swish";
  j["partial_rotary_factor"] = 1.0;
  j["quantization_config"] = nullptr;
  absl::StatusOr<ModelConfig> c = ModelConfig::Parse(j.dump(), "m.json");
  ASSERT_TRUE(c.ok()) << c.status();
  j["partial_rotary_factor"] = nullptr;
  EXPECT_TRUE(ModelConfig::Parse(j.dump(), "m.json").ok());
}

// The window of the KV cache as a whole: only when every layer has one.
TEST(ModelConfigTest, CacheWindowNeedsEveryLayerWindowed) {
  json mistral = json::parse(kMistral);
  mistral["sliding_window"] = 4096;
  absl::StatusOr<ModelConfig> m = ModelConfig::Parse(mistral.dump(), "m.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->CacheWindow(), 4096);
  mistral["sliding_window"] = nullptr;
  m = ModelConfig::Parse(mistral.dump(), "m.json");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->CacheWindow(), 0);
  json qwen = json::parse(kQwen2);
  qwen["use_sliding_window"] = true;
  qwen["sliding_window"] = 512;
  qwen["max_window_layers"] = 0;  // every layer windowed
  absl::StatusOr<ModelConfig> q = ModelConfig::Parse(qwen.dump(), "q.json");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->CacheWindow(), 512);
  qwen["max_window_layers"] = 1;  // layer 0 sees everything
  q = ModelConfig::Parse(qwen.dump(), "q.json");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->CacheWindow(), 0);
}

TEST(ModelConfigTest, MistralSlidingWindowMustBePositive) {
  json j = json::parse(kMistral);
  j["sliding_window"] = 0;
  absl::StatusOr<ModelConfig> c = ModelConfig::Parse(j.dump(), "m.json");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("'sliding_window'"));
}

TEST(ModelConfigTest, MalformedJson) {
  for (const char* text : {"{\"hidden_size\": 4096,", "", "not json"}) {
    absl::StatusOr<ModelConfig> c = ModelConfig::Parse(text, "/m/config.json");
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(c.status().message()), HasSubstr("/m/config.json: invalid JSON"));
  }
  absl::StatusOr<ModelConfig> c = ModelConfig::Parse("[1, 2]", "/m/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("expected a JSON object"));
}

TEST(ModelConfigTest, LoadFromDirectory) {
  std::string dir = testing::MakeTestDir();
  testing::WriteText(dir + "/config.json", kQwen2);
  absl::StatusOr<ModelConfig> c = ModelConfig::LoadFromDirectory(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, ModelArchitecture::kQwen2);

  // Errors name the file that was read.
  testing::WriteText(dir + "/config.json", R"({"architectures": ["LlamaForCausalLM"]})");
  c = ModelConfig::LoadFromDirectory(dir + "/");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr(dir + "/config.json"));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("'hidden_size'"));
}

// generation_config.json's end tokens join config.json's (Llama 3 Instruct:
// <|eot_id|> 128009 is only there); duplicates are dropped, and a broken
// file is an error naming it.
TEST(ModelConfigTest, GenerationConfigAddsEndTokens) {
  std::string dir = testing::MakeTestDir();
  testing::WriteText(dir + "/config.json", kLlama32_1B);  // eos 128001
  testing::WriteText(dir + "/generation_config.json",
                     R"({"bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009],
                         "temperature": 0.6, "top_p": 0.9})");
  absl::StatusOr<ModelConfig> c = ModelConfig::LoadFromDirectory(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->eos_token_ids, ElementsAre(128001, 128008, 128009));

  testing::WriteText(dir + "/generation_config.json", R"({"eos_token_id": 128009})");
  c = ModelConfig::LoadFromDirectory(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->eos_token_ids, ElementsAre(128001, 128009));

  testing::WriteText(dir + "/generation_config.json", R"({"eos_token_id": "eot"})");
  c = ModelConfig::LoadFromDirectory(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              AllOf(HasSubstr("generation_config.json"), HasSubstr("eos_token_id")));
  testing::WriteText(dir + "/generation_config.json", "{not json");
  EXPECT_FALSE(ModelConfig::LoadFromDirectory(dir).ok());
}

TEST(ModelConfigTest, LoadFromMissingDirectory) {
  std::string dir = testing::MakeTestDir() + "/nope";
  absl::StatusOr<ModelConfig> c = ModelConfig::LoadFromDirectory(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("model directory not found: " + dir));
}

}  // namespace
}  // namespace folio
