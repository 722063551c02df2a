#include "common/generation_defaults.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace folio {
namespace {

using ::testing::HasSubstr;

// Meta-Llama-3.1-8B-Instruct's generation_config.json.
constexpr char kLlama31[] = R"({"bos_token_id": 128000, "do_sample": true,
  "eos_token_id": [128001, 128008, 128009], "temperature": 0.6, "top_p": 0.9,
  "transformers_version": "4.42.3"})";

SamplingDefaults Parse(const std::string& text) {
  absl::StatusOr<SamplingDefaults> d = ParseSamplingDefaults(text, "g.json");
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *d : SamplingDefaults();
}

TEST(SamplingDefaultsTest, ReadsTheRecommendedSamplingFields) {
  const SamplingDefaults d = Parse(kLlama31);
  EXPECT_EQ(d.temperature, 0.6f);
  EXPECT_EQ(d.top_p, 0.9f);
  EXPECT_FALSE(d.top_k || d.min_p || d.repetition_penalty || d.max_tokens);
  EXPECT_EQ(d.ToString(), "temperature=0.6 top_p=0.9");

  const SamplingDefaults all = Parse(R"({"temperature": 0.7, "top_p": 0.8, "top_k": 20,
      "min_p": 0.05, "repetition_penalty": 1.05, "max_new_tokens": 256})");
  EXPECT_EQ(all.temperature, 0.7f);
  EXPECT_EQ(all.top_p, 0.8f);
  EXPECT_EQ(all.top_k, 20);
  EXPECT_EQ(all.min_p, 0.05f);
  EXPECT_EQ(all.repetition_penalty, 1.05f);
  EXPECT_EQ(all.max_tokens, 256);  // max_new_tokens
  SamplingParams p;
  all.ApplyTo(&p);
  EXPECT_EQ(p.temperature, 0.7f);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_EQ(p.min_p, 0.05f);
  EXPECT_EQ(p.max_tokens, 256);
  EXPECT_EQ(p.presence_penalty, 0.0f);  // not a generation_config field
}

// transformers' own defaults (what to_diff_dict leaves out) and nulls
// recommend nothing; top_k 0 and -1 recommend "off".
TEST(SamplingDefaultsTest, TransformersDefaultsAndNullsRecommendNothing) {
  EXPECT_TRUE(Parse(R"({"temperature": 1.0, "top_p": 1.0, "top_k": 50,
      "repetition_penalty": 1.0, "min_p": null, "max_new_tokens": null})").empty());
  EXPECT_TRUE(Parse(R"({"eos_token_id": 2, "do_sample": true})").empty());
  EXPECT_EQ(Parse(R"({"top_k": 0})").top_k, 0);
  EXPECT_EQ(Parse(R"({"top_k": -1})").top_k, 0);
  EXPECT_EQ(Parse(R"({"temperature": 0})").temperature, 0.0f);  // greedy is a recommendation
  EXPECT_EQ(Parse("{}").ToString(), "none");
}

TEST(SamplingDefaultsTest, ValuesNoRequestCouldUseNameTheField) {
  struct Case {
    const char* json;
    const char* message;
  };
  const Case cases[] = {
      {R"({"top_p": 0})", "g.json: field 'top_p' must be in (0, 1], got 0"},
      {R"({"top_p": 1.5})", "field 'top_p'"},
      {R"({"temperature": -0.5})", "field 'temperature' must be >= 0"},
      {R"({"top_k": 2.5})", "field 'top_k' must be an integer"},
      {R"({"top_k": -3})", "field 'top_k'"},
      {R"({"min_p": 2})", "field 'min_p' must be in [0, 1]"},
      {R"({"repetition_penalty": 0})", "field 'repetition_penalty' must be > 0"},
      {R"({"max_new_tokens": 0})", "field 'max_new_tokens' must be an integer >= 1"},
      {R"({"max_new_tokens": 1e12})", "field 'max_new_tokens'"},
      // Finite as a double, not as the float that is kept.
      {R"({"temperature": 1e39})", "field 'temperature' is too large: 1e+39"},
      {R"({"repetition_penalty": 1e39})", "field 'repetition_penalty' is too large"},
      {R"({"top_p": 1e-46})", "field 'top_p' must be in (0, 1], got 1e-46"},
      {R"({"temperature": "0.6"})", "field 'temperature' must be a number"},
      {R"({"temperature": )", "g.json: invalid JSON"},
      {R"([1, 2])", "g.json: expected a JSON object"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<SamplingDefaults> d = ParseSamplingDefaults(c.json, "g.json");
    ASSERT_FALSE(d.ok()) << c.json;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_THAT(std::string(d.status().message()), HasSubstr(c.message)) << c.json;
  }
}

class LoadSamplingDefaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("gen_defaults_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_ / "with");
    std::filesystem::create_directories(dir_ / "without");
    std::ofstream(dir_ / "with" / "generation_config.json") << kLlama31;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(LoadSamplingDefaultsTest, AutoNoneAndADirectory) {
  const std::string with = (dir_ / "with").string(), without = (dir_ / "without").string();
  std::string source = "stale";
  absl::StatusOr<SamplingDefaults> d = LoadSamplingDefaults("auto", with, &source);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->temperature, 0.6f);
  EXPECT_EQ(source, with + "/generation_config.json");

  // auto without a file: no defaults, no error.
  d = LoadSamplingDefaults("auto", without, &source);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->empty());
  EXPECT_EQ(source, "");

  // none (and vLLM's name for it) ignores the model's file.
  for (const char* none : {"none", "vllm"}) {
    d = LoadSamplingDefaults(none, with, &source);
    ASSERT_TRUE(d.ok()) << none;
    EXPECT_TRUE(d->empty()) << none;
  }

  // A directory of its own, whatever the model has.
  d = LoadSamplingDefaults(with, without, &source);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->top_p, 0.9f);
  d = LoadSamplingDefaults(without, with, &source);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("--generation-config " + without));
}

}  // namespace
}  // namespace folio
