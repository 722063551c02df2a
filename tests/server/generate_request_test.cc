// ParseGenerateRequest: defaults, tokenization and INVALID_ARGUMENT errors
// that name the offending field.

#include "scheduler/server/generate_request.h"

#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server_test_util.h"

namespace folio {
namespace {

using ::testing::HasSubstr;

class GenerateRequestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = Tokenizer::LoadFromDirectory(testing_util::kDemoDir);
    ASSERT_TRUE(t.ok());
    tokenizer_ = std::move(*t);
    limits_.vocab_size = 2048;
    limits_.max_model_len = 64;
    limits_.eos_token_ids = {2047};
  }
  absl::StatusOr<ParsedRequest> Parse(const v1::GenerateRequest& r) {
    return ParseGenerateRequest(r, *tokenizer_, limits_);
  }
  void ExpectInvalid(const v1::GenerateRequest& r, const std::string& field) {
    absl::StatusOr<ParsedRequest> p = Parse(r);
    ASSERT_FALSE(p.ok()) << "accepted, expected an error naming " << field;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(p.status().message()), HasSubstr(field));
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  RequestLimits limits_;
};

// The model's generation_config.json recommendations fill the fields a
// request leaves unset; a request's own values, zeros included, win.
TEST_F(GenerateRequestTest, ModelDefaultsFillOnlyUnsetFields) {
  limits_.sampling_defaults.temperature = 0.6f;
  limits_.sampling_defaults.top_p = 0.9f;
  limits_.sampling_defaults.top_k = 20;
  limits_.sampling_defaults.min_p = 0.05f;
  limits_.sampling_defaults.repetition_penalty = 1.1f;
  limits_.sampling_defaults.max_tokens = 30;
  v1::GenerateRequest r;
  r.set_text("hello");
  absl::StatusOr<ParsedRequest> p = Parse(r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->spec.sampling.temperature, 0.6f);
  EXPECT_EQ(p->spec.sampling.top_p, 0.9f);
  EXPECT_EQ(p->spec.sampling.top_k, 20);
  EXPECT_EQ(p->spec.sampling.min_p, 0.05f);
  EXPECT_EQ(p->spec.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(p->spec.sampling.max_tokens, 30);

  auto* s = r.mutable_sampling_params();
  s->set_temperature(0.0f);
  s->set_top_p(1.0f);
  s->set_top_k(0);
  s->set_min_p(0.0f);
  s->set_repetition_penalty(1.0f);
  s->set_max_tokens(5);
  p = Parse(r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->spec.sampling.temperature, 0.0f);
  EXPECT_EQ(p->spec.sampling.top_p, 1.0f);
  EXPECT_EQ(p->spec.sampling.top_k, 0);
  EXPECT_EQ(p->spec.sampling.min_p, 0.0f);
  EXPECT_EQ(p->spec.sampling.repetition_penalty, 1.0f);
  EXPECT_EQ(p->spec.sampling.max_tokens, 5);
  s->set_top_k(-1);  // also off
  p = Parse(r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->spec.sampling.top_k, 0);
  // min_tokens is checked against the max_tokens in effect, the model's too.
  s->clear_max_tokens();
  s->set_min_tokens(31);
  ExpectInvalid(r, "sampling_params.min_tokens must be at most max_tokens (30, the model's "
                   "generation_config.json default), got 31");
}

TEST_F(GenerateRequestTest, TruncatePromptTokensKeepsTheEnd) {
  v1::GenerateRequest r;
  for (TokenId t : {5, 6, 7, 8, 9}) r.mutable_token_ids()->add_ids(t);
  r.mutable_sampling_params()->set_truncate_prompt_tokens(2);
  absl::StatusOr<ParsedRequest> p = Parse(r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->spec.prompt, (std::vector<TokenId>{8, 9}));
  // -1: max_model_len (64) - 1 tokens, so a 100-token prompt now fits.
  r.mutable_token_ids()->clear_ids();
  for (int i = 0; i < 100; ++i) r.mutable_token_ids()->add_ids(i);
  ExpectInvalid([&] {
    v1::GenerateRequest whole = r;
    whole.mutable_sampling_params()->clear_truncate_prompt_tokens();
    return whole;
  }(), "prompt has 100 tokens");
  r.mutable_sampling_params()->set_truncate_prompt_tokens(-1);
  p = Parse(r);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->spec.prompt.size(), 63u);
  EXPECT_EQ(p->spec.prompt.front(), 37);
  r.mutable_sampling_params()->set_truncate_prompt_tokens(0);
  ExpectInvalid(r, "sampling_params.truncate_prompt_tokens must be >= 1");
}

TEST_F(GenerateRequestTest, DefaultsFollowVllm) {
  v1::GenerateRequest r;
  r.set_text("In the beginning");
  absl::StatusOr<ParsedRequest> p = Parse(r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->spec.prompt.front(), 2046);  // BOS first
  EXPECT_EQ(p->spec.sampling.temperature, 1.0f);
  EXPECT_EQ(p->spec.sampling.top_p, 1.0f);
  EXPECT_EQ(p->spec.sampling.max_tokens, 16);
  EXPECT_EQ(p->spec.sampling.n, 1);
  EXPECT_EQ(p->spec.sampling.best_of, 1);
  EXPECT_FALSE(p->spec.sampling.seed.has_value());
  EXPECT_FALSE(p->logprobs.has_value());
  EXPECT_FALSE(p->spec.sampling.prompt_logprobs.has_value());
  EXPECT_FALSE(p->request_id.has_value());
  EXPECT_EQ(p->spec.eos_token_ids, std::vector<TokenId>{2047});
}

TEST_F(GenerateRequestTest, CarriesEverySetting) {
  v1::GenerateRequest r;
  r.set_request_id("abc");
  r.mutable_token_ids()->add_ids(5);
  r.mutable_token_ids()->add_ids(6);
  auto* s = r.mutable_sampling_params();
  s->set_temperature(0.5f);
  s->set_top_k(-1);
  s->set_top_p(0.9f);
  s->set_min_p(0.1f);
  s->set_seed(42);
  s->set_n(2);
  s->set_best_of(3);
  s->set_max_tokens(7);
  s->add_stop("amen");
  s->add_stop_token_ids(9);
  s->set_logprobs(3);
  s->set_prompt_logprobs(2);
  s->set_priority(-2);
  s->set_cache_salt("tenant");
  limits_.priority_scheduling = true;
  absl::StatusOr<ParsedRequest> p = Parse(r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p->request_id, "abc");
  EXPECT_EQ(p->spec.prompt, (std::vector<TokenId>{5, 6}));  // token ids: no BOS added
  EXPECT_EQ(p->spec.sampling.top_k, 0);
  EXPECT_EQ(*p->spec.sampling.seed, 42u);
  EXPECT_EQ(p->spec.sampling.best_of, 3);
  EXPECT_EQ(p->spec.sampling.max_tokens, 7);
  EXPECT_EQ(p->stop_strings, std::vector<std::string>{"amen"});
  EXPECT_EQ(*p->logprobs, 3);
  EXPECT_EQ(p->spec.sampling.prompt_logprobs, 2);
  EXPECT_EQ(p->spec.priority, -2);
  EXPECT_EQ(p->spec.cache_salt, "tenant");
  // The text options keep their defaults.
  EXPECT_TRUE(p->text.skip_special_tokens);
  EXPECT_FALSE(p->text.include_stop);
  EXPECT_EQ(p->text.min_tokens, 0);
  EXPECT_TRUE(p->spec.sampling.logit_bias.empty());
}

TEST_F(GenerateRequestTest, CarriesMinTokensLogitBiasAndTextOptions) {
  v1::GenerateRequest r;
  r.set_text("hello");
  auto* s = r.mutable_sampling_params();
  s->set_max_tokens(10);
  s->set_min_tokens(4);
  (*s->mutable_logit_bias())[900] = -100.0f;
  (*s->mutable_logit_bias())[7] = 2.5f;
  (*s->mutable_logit_bias())[2047] = 100.0f;
  s->set_include_stop_str_in_output(true);
  s->set_skip_special_tokens(false);
  absl::StatusOr<ParsedRequest> p = Parse(r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->spec.sampling.min_tokens, 4);
  EXPECT_EQ(p->text.min_tokens, 4);
  EXPECT_TRUE(p->text.include_stop);
  EXPECT_FALSE(p->text.skip_special_tokens);
  // Ascending by token, whatever order the map iterates in.
  EXPECT_EQ(p->spec.sampling.logit_bias,
            (std::vector<TokenBias>{{7, 2.5f}, {900, -100.0f}, {2047, 100.0f}}));
  s->set_skip_special_tokens(true);
  p = Parse(r);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->text.skip_special_tokens);
}

TEST_F(GenerateRequestTest, CarriesAllowedTokenIdsAndBadWords) {
  v1::GenerateRequest r;
  r.set_text("hello");
  auto* s = r.mutable_sampling_params();
  for (int id : {900, 7, 900, 2047}) s->add_allowed_token_ids(id);
  s->add_bad_words("LORD");
  s->add_bad_words(" and");
  absl::StatusOr<ParsedRequest> p = Parse(r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->spec.sampling.allowed_token_ids, (std::vector<TokenId>{7, 900, 2047}));
  // Tokenized as vLLM does (tests/tokenizer/bad_words_test covers the rule):
  // "LORD" alone, "and" and " and" (one token each).
  ASSERT_EQ(p->spec.sampling.bad_words_token_ids.size(), 3u);
  EXPECT_EQ(p->spec.sampling.bad_words_token_ids[0], tokenizer_->EncodePrompt("LORD", false));
  EXPECT_EQ(p->spec.sampling.bad_words_token_ids[1], tokenizer_->EncodePrompt("and", false));
  EXPECT_EQ(p->spec.sampling.bad_words_token_ids[2], tokenizer_->EncodePrompt(" and", false));
}

TEST_F(GenerateRequestTest, ErrorsNameTheField) {
  v1::GenerateRequest r;
  ExpectInvalid(r, "prompt");
  r.set_text("");
  ExpectInvalid(r, "text");
  r.mutable_token_ids();
  ExpectInvalid(r, "token_ids.ids");
  r.mutable_token_ids()->add_ids(1);
  r.mutable_token_ids()->add_ids(5000);
  ExpectInvalid(r, "token_ids.ids[1]");

  auto with = [&](auto set) {
    v1::GenerateRequest q;
    q.set_text("hello");
    set(*q.mutable_sampling_params());
    return q;
  };
  ExpectInvalid(with([](v1::SamplingParams& s) { s.set_top_p(1.5f); }), "sampling_params.top_p");
  ExpectInvalid(with([](v1::SamplingParams& s) { s.set_temperature(-1); }), "sampling_params.temperature");
  ExpectInvalid(with([](v1::SamplingParams& s) { s.set_max_tokens(0); }), "sampling_params.max_tokens");
  ExpectInvalid(with([](v1::SamplingParams& s) { s.set_n(3); s.set_best_of(2); }), "sampling_params.best_of");
  ExpectInvalid(with([](v1::SamplingParams& s) { s.add_stop(""); }), "sampling_params.stop[0]");
  ExpectInvalid(with([](v1::SamplingParams& s) { s.add_stop_token_ids(4096); }),
                "sampling_params.stop_token_ids[0]");
  ExpectInvalid(with([](v1::SamplingParams& s) { s.set_logprobs(50); }), "sampling_params.logprobs");
  // The value sent is the one named, however large.
  ExpectInvalid(with([](v1::SamplingParams& s) { s.set_logprobs(4294967295u); }),
                "sampling_params.logprobs must be in [0, 20], got 4294967295");
  ExpectInvalid(with([](v1::SamplingParams& s) { s.set_prompt_logprobs(21); }),
                "sampling_params.prompt_logprobs must be in [0, 20], got 21");
  ExpectInvalid(with([](v1::SamplingParams& s) { s.set_prompt_logprobs(4294967295u); }),
                "sampling_params.prompt_logprobs must be in [0, 20], got 4294967295");
  ExpectInvalid(with([](v1::SamplingParams& s) { s.set_n(4000000000u); }), "sampling_params.n");
  // A priority the scheduler would ignore.
  ExpectInvalid(with([](v1::SamplingParams& s) { s.set_priority(3); }),
                "sampling_params.priority is 3, but the server schedules first-come first-served");
  ExpectInvalid(with([](v1::SamplingParams& s) { s.set_min_tokens(17); }),
                "sampling_params.min_tokens must be at most max_tokens (16), got 17");
  ExpectInvalid(with([](v1::SamplingParams& s) { s.set_min_tokens(4294967295u); }),
                "sampling_params.min_tokens");
  ExpectInvalid(with([](v1::SamplingParams& s) {
                  s.add_allowed_token_ids(5);
                  s.add_allowed_token_ids(2048);
                }),
                "sampling_params.allowed_token_ids[1] is 2048, outside the vocabulary [0, 2048)");
  ExpectInvalid(with([](v1::SamplingParams& s) { s.add_allowed_token_ids(-1); }),
                "sampling_params.allowed_token_ids[0] is -1, outside the vocabulary");
  ExpectInvalid(with([](v1::SamplingParams& s) {
                  s.add_bad_words("LORD");
                  s.add_bad_words("  ");
                }),
                "sampling_params.bad_words[1] must contain a word");
  ExpectInvalid(with([](v1::SamplingParams& s) {
                  s.add_allowed_token_ids(2047);  // the demo model's EOS
                  s.set_min_tokens(2);
                }),
                "sampling_params.allowed_token_ids leaves no token to sample");
  ExpectInvalid(with([](v1::SamplingParams& s) { (*s.mutable_logit_bias())[2048] = 1.0f; }),
                "sampling_params.logit_bias[2048] names a token outside the vocabulary");
  ExpectInvalid(with([](v1::SamplingParams& s) { (*s.mutable_logit_bias())[-3] = 1.0f; }),
                "sampling_params.logit_bias has a negative token id, -3");
  ExpectInvalid(with([](v1::SamplingParams& s) { (*s.mutable_logit_bias())[5] = 100.5f; }),
                "sampling_params.logit_bias[5] must be in [-100, 100]");
  ExpectInvalid(with([](v1::SamplingParams& s) {
                  (*s.mutable_logit_bias())[5] = std::numeric_limits<float>::quiet_NaN();
                }),
                "sampling_params.logit_bias[5]");

  v1::GenerateRequest long_prompt;
  long_prompt.mutable_token_ids()->mutable_ids()->Resize(64, 7);
  ExpectInvalid(long_prompt, "max_model_len");
  v1::GenerateRequest empty_id;
  empty_id.set_text("x");
  empty_id.set_request_id("");
  ExpectInvalid(empty_id, "request_id");
}

}  // namespace
}  // namespace folio
