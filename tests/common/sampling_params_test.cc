// SortLogitBias: the one ordering of logit biases that the server's request
// parsing and `folio run` both produce, and that validation requires.

#include "common/sampling_params.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace folio {
namespace {

TEST(SortLogitBiasTest, AscendingTokensAndTheLastValueOfARepeatedOne) {
  std::vector<TokenBias> biases = {{9, 1.0f}, {3, -2.0f}, {9, 5.0f}, {0, 0.5f}, {3, 7.0f}, {9, -1.0f}};
  SortLogitBias(&biases);
  EXPECT_EQ(biases, (std::vector<TokenBias>{{0, 0.5f}, {3, 7.0f}, {9, -1.0f}}));
  SamplingParams p;
  p.logit_bias = biases;
  EXPECT_TRUE(ValidateSamplingParams(p).ok());

  std::vector<TokenBias> none;
  SortLogitBias(&none);
  EXPECT_TRUE(none.empty());
}

TEST(SortUniqueTokenIdsTest, AscendingAndDistinct) {
  std::vector<TokenId> ids = {9, 3, 9, 0, 3};
  SortUniqueTokenIds(&ids);
  EXPECT_EQ(ids, (std::vector<TokenId>{0, 3, 9}));
  SamplingParams p;
  p.allowed_token_ids = ids;
  EXPECT_TRUE(ValidateSamplingParams(p).ok());
}

TEST(ValidateSamplingParamsTest, AllowedTokenIdsAndBadWords) {
  SamplingParams p;
  p.allowed_token_ids = {4, 2};
  EXPECT_EQ(ValidateSamplingParams(p).message(),
            "allowed_token_ids must be ascending and distinct, got 2 after 4");
  p.allowed_token_ids = {-1, 2};
  EXPECT_EQ(ValidateSamplingParams(p).message(),
            "allowed_token_ids[0] must be non-negative, got -1");
  p.allowed_token_ids.clear();
  p.bad_words_token_ids = {{1, 2}, {}};
  EXPECT_EQ(ValidateSamplingParams(p).message(), "bad_words_token_ids[1] must not be empty");
  p.bad_words_token_ids = {{1, -2}};
  EXPECT_EQ(ValidateSamplingParams(p).message(),
            "bad_words_token_ids[0] has a negative token id, -2");
  p.bad_words_token_ids = {{1, 2}, {3}};
  EXPECT_TRUE(ValidateSamplingParams(p).ok());
}

TEST(CheckAllowedTokensLeaveAChoiceTest, SomeAllowedTokenMustStaySampleable) {
  SamplingParams p;
  const std::vector<TokenId> eos = {2};
  EXPECT_TRUE(CheckAllowedTokensLeaveAChoice(p, eos).ok());  // no allowed_token_ids
  p.allowed_token_ids = {2, 7};
  p.stop_token_ids = {7};
  EXPECT_TRUE(CheckAllowedTokensLeaveAChoice(p, eos).ok());  // min_tokens 0: both may end it
  p.min_tokens = 3;
  EXPECT_EQ(CheckAllowedTokensLeaveAChoice(p, eos).message(),
            "allowed_token_ids leaves no token to sample: each is a one-token bad word or ends "
            "the sequence before min_tokens (3)");
  p.allowed_token_ids = {2, 7, 9};
  EXPECT_TRUE(CheckAllowedTokensLeaveAChoice(p, eos).ok());
  p.bad_words_token_ids = {{4, 9}};  // two tokens: bans 9 only after 4
  EXPECT_TRUE(CheckAllowedTokensLeaveAChoice(p, eos).ok());
  p.bad_words_token_ids = {{9}};
  EXPECT_FALSE(CheckAllowedTokensLeaveAChoice(p, eos).ok());
  p.min_tokens = 0;
  p.allowed_token_ids = {9};
  EXPECT_EQ(CheckAllowedTokensLeaveAChoice(p, eos).message(),
            "allowed_token_ids leaves no token to sample: each is a one-token bad word");
}

// Left truncation keeps the prompt's last k tokens; -1 leaves room for one
// new token under max_model_len.
TEST(TruncatePromptTest, KeepsTheLastTokens) {
  std::vector<TokenId> p = {1, 2, 3, 4, 5};
  ASSERT_TRUE(TruncatePrompt(3, 100, &p).ok());
  EXPECT_EQ(p, (std::vector<TokenId>{3, 4, 5}));
  ASSERT_TRUE(TruncatePrompt(10, 100, &p).ok());  // shorter already: unchanged
  EXPECT_EQ(TruncatePrompt(101, 100, &p).message(),
            "truncate_prompt_tokens must be at most max_model_len (100), got 101");
  EXPECT_EQ(p, (std::vector<TokenId>{3, 4, 5}));
  p = {1, 2, 3, 4, 5};
  ASSERT_TRUE(TruncatePrompt(-1, 4, &p).ok());
  EXPECT_EQ(p, (std::vector<TokenId>{3, 4, 5}));
  for (int32_t bad : {0, -2, INT32_MIN}) {
    const absl::Status s = TruncatePrompt(bad, 4, &p);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(std::string(s.message()).find("truncate_prompt_tokens must be"), std::string::npos);
  }
  EXPECT_EQ(p, (std::vector<TokenId>{3, 4, 5}));  // refused: untouched
}

}  // namespace
}  // namespace folio
