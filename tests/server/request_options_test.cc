// The request options that shape what a sequence may sample and what its
// text shows, end to end through the engine, the scheduler and a real CPU
// worker on the demo model: logit_bias, allowed_token_ids, bad_words,
// min_tokens (against EOS, stop token ids and stop strings),
// include_stop_str_in_output, skip_special_tokens and prompt_logprobs. Every workload ends with every KV block free.

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/server/engine.h"
#include "server_test_util.h"

namespace folio {
namespace {

using namespace testing_util;

constexpr int kMaxTokens = 24;
constexpr TokenId kEos = 2047;  // <|end_of_text|>: the demo model's EOS, a special token

class RequestOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = MakeDemoEngine();
    ASSERT_NE(engine_, nullptr);
    auto t = Tokenizer::LoadFromDirectory(kDemoDir);
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = std::move(*t);
    reference_ = LoadReference()[0];
  }
  void TearDown() override { ExpectDrained(*engine_, 256); }

  // Runs `r` to its end; its one sequence.
  StreamedSequence Run(const v1::GenerateRequest& r) {
    Submitted s = Submit(*engine_, r);
    EXPECT_TRUE(s.sink->Wait());
    EXPECT_TRUE(s.sink->error().ok()) << s.sink->error();
    std::vector<StreamedSequence> seqs = Reassemble(s.sink->responses());
    EXPECT_EQ(seqs.size(), 1u);
    return seqs.empty() ? StreamedSequence() : seqs[0];
  }
  v1::GenerateRequest Greedy(int max_tokens = kMaxTokens) const {
    v1::GenerateRequest r = GreedyRequest(reference_.prompt, max_tokens);
    r.mutable_sampling_params()->set_logprobs(0);
    r.mutable_sampling_params()->set_ignore_eos(false);
    return r;
  }
  std::vector<TokenId> ReferenceOutput(size_t n) const {
    return {reference_.output_ids.begin(), reference_.output_ids.begin() + n};
  }

  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Tokenizer> tokenizer_;
  ReferenceCase reference_;
};

TEST_F(RequestOptionsTest, LogitBiasForcesAndBansTokensButLogprobsStayTheModels) {
  // +100 on one ordinary token makes it every greedy pick.
  const TokenId forced = reference_.output_ids[3];
  v1::GenerateRequest r = Greedy();
  r.mutable_sampling_params()->set_ignore_eos(true);
  (*r.mutable_sampling_params()->mutable_logit_bias())[forced] = 100.0f;
  StreamedSequence seq = Run(r);
  EXPECT_EQ(seq.token_ids, std::vector<TokenId>(kMaxTokens, forced));
  // The first log-prob is the unbiased model's: the reference's first token
  // is more likely than the forced one, so the forced one's is below it.
  ASSERT_FALSE(seq.logprobs.empty());
  EXPECT_LT(seq.logprobs[0], reference_.logprobs[0]);
  EXPECT_LT(seq.logprobs[0], -0.01f);

  // -100 on the reference's first token: greedy takes another first token.
  v1::GenerateRequest ban = Greedy(4);
  (*ban.mutable_sampling_params()->mutable_logit_bias())[reference_.output_ids[0]] = -100.0f;
  seq = Run(ban);
  ASSERT_FALSE(seq.token_ids.empty());
  EXPECT_NE(seq.token_ids[0], reference_.output_ids[0]);

  // A bias of 0 changes nothing.
  v1::GenerateRequest zero = Greedy();
  (*zero.mutable_sampling_params()->mutable_logit_bias())[forced] = 0.0f;
  EXPECT_EQ(Run(zero).token_ids, ReferenceOutput(kMaxTokens));
}

TEST_F(RequestOptionsTest, AllowedTokenIdsKeepEveryTokenInTheSet) {
  // The set holds none of the reference's first four tokens: greedy must
  // leave its path, and every token stays in the set.
  const std::vector<TokenId> allowed = {reference_.output_ids[5], 300, 301, 302, 1000};
  v1::GenerateRequest r = Greedy();
  r.mutable_sampling_params()->set_ignore_eos(true);
  for (TokenId t : allowed) r.mutable_sampling_params()->add_allowed_token_ids(t);
  StreamedSequence seq = Run(r);
  ASSERT_EQ(seq.token_ids.size(), static_cast<size_t>(kMaxTokens));
  for (TokenId t : seq.token_ids) {
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), t), allowed.end()) << t;
  }
  EXPECT_NE(seq.token_ids, ReferenceOutput(kMaxTokens));
  // Draws too, under any seed.
  r.mutable_sampling_params()->set_temperature(1.0f);
  r.mutable_sampling_params()->set_seed(7);
  for (TokenId t : Run(r).token_ids) {
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), t), allowed.end()) << t;
  }
}

TEST_F(RequestOptionsTest, BadWordsNeverAppear) {
  // The free run says " and" (its own token, as is "and": vLLM's rule bans
  // both forms); with bad_words ["and"] neither may appear.
  const std::vector<TokenId> plain = tokenizer_->EncodePrompt("and", false);
  const std::vector<TokenId> spaced = tokenizer_->EncodePrompt(" and", false);
  ASSERT_EQ(plain.size(), 1u);
  ASSERT_EQ(spaced.size(), 1u);
  const StreamedSequence free_run = Run(Greedy());
  ASSERT_NE(std::find(free_run.token_ids.begin(), free_run.token_ids.end(), spaced[0]),
            free_run.token_ids.end());
  v1::GenerateRequest r = Greedy();
  r.mutable_sampling_params()->set_ignore_eos(true);
  r.mutable_sampling_params()->add_bad_words("and");
  const StreamedSequence seq = Run(r);
  ASSERT_EQ(seq.token_ids.size(), static_cast<size_t>(kMaxTokens));
  for (TokenId banned : {plain[0], spaced[0]}) {
    EXPECT_EQ(std::find(seq.token_ids.begin(), seq.token_ids.end(), banned), seq.token_ids.end())
        << banned;
  }
  // Up to the first " and" nothing changes.
  const size_t first = static_cast<size_t>(
      std::find(free_run.token_ids.begin(), free_run.token_ids.end(), spaced[0]) -
      free_run.token_ids.begin());
  EXPECT_TRUE(std::equal(seq.token_ids.begin(), seq.token_ids.begin() + first,
                         free_run.token_ids.begin()));
}

TEST_F(RequestOptionsTest, MinTokensHoldsOffEos) {
  // A large bias on EOS ends the sequence at once...
  v1::GenerateRequest r = Greedy();
  (*r.mutable_sampling_params()->mutable_logit_bias())[kEos] = 100.0f;
  StreamedSequence seq = Run(r);
  EXPECT_EQ(seq.token_ids, std::vector<TokenId>{kEos});
  EXPECT_EQ(seq.finish.reason(), v1::FINISH_REASON_EOS);
  EXPECT_EQ(seq.text, "");
  // ...unless min_tokens bans it: min_tokens other tokens first, then EOS.
  r.mutable_sampling_params()->set_min_tokens(5);
  seq = Run(r);
  ASSERT_EQ(seq.token_ids.size(), 6u);
  EXPECT_EQ(seq.token_ids.back(), kEos);
  EXPECT_EQ(std::count(seq.token_ids.begin(), seq.token_ids.end(), kEos), 1);
  EXPECT_EQ(seq.finish.reason(), v1::FINISH_REASON_EOS);
  // With the ban the model's own choices come: the reference, then EOS.
  EXPECT_EQ(std::vector<TokenId>(seq.token_ids.begin(), seq.token_ids.end() - 1), ReferenceOutput(5));
  EXPECT_EQ(seq.text, tokenizer_->Decode(ReferenceOutput(5)));
  // ignore_eos: EOS is still banned until min_tokens (as in vLLM), then it
  // comes and is ignored.
  r.mutable_sampling_params()->set_ignore_eos(true);
  r.mutable_sampling_params()->set_max_tokens(8);
  r.mutable_sampling_params()->set_min_tokens(4);
  seq = Run(r);
  std::vector<TokenId> want = ReferenceOutput(4);
  want.insert(want.end(), 4, kEos);
  EXPECT_EQ(seq.token_ids, want);
  EXPECT_EQ(seq.finish.reason(), v1::FINISH_REASON_LENGTH);
  r.mutable_sampling_params()->set_ignore_eos(false);
  // min_tokens = max_tokens: EOS never comes.
  r.mutable_sampling_params()->set_max_tokens(7);
  r.mutable_sampling_params()->set_min_tokens(7);
  seq = Run(r);
  EXPECT_EQ(seq.token_ids, ReferenceOutput(7));
  EXPECT_EQ(seq.finish.reason(), v1::FINISH_REASON_LENGTH);
}

TEST_F(RequestOptionsTest, MinTokensHoldsOffStopTokenIds) {
  // The reference's first token as a stop token: it ends the sequence at once.
  const TokenId stop = reference_.output_ids[0];
  v1::GenerateRequest r = Greedy();
  r.mutable_sampling_params()->set_ignore_eos(true);
  r.mutable_sampling_params()->add_stop_token_ids(stop);
  StreamedSequence seq = Run(r);
  EXPECT_EQ(seq.token_ids, std::vector<TokenId>{stop});
  EXPECT_EQ(seq.finish.reason(), v1::FINISH_REASON_STOP);
  // With min_tokens it is banned for the first three tokens; nothing else ends it then.
  r.mutable_sampling_params()->set_min_tokens(3);
  seq = Run(r);
  ASSERT_GE(seq.token_ids.size(), 4u);
  EXPECT_EQ(std::count(seq.token_ids.begin(), seq.token_ids.begin() + 3, stop), 0);
  if (seq.finish.reason() == v1::FINISH_REASON_STOP) {
    EXPECT_EQ(seq.token_ids.back(), stop);
    EXPECT_EQ(std::count(seq.token_ids.begin(), seq.token_ids.end(), stop), 1);
  } else {
    EXPECT_EQ(seq.finish.reason(), v1::FINISH_REASON_LENGTH);
    EXPECT_EQ(seq.token_ids.size(), static_cast<size_t>(kMaxTokens));
  }
}

TEST_F(RequestOptionsTest, MinTokensLetsEarlyStopStringsPass) {
  const std::vector<TokenId> out = ReferenceOutput(kMaxTokens);
  // A one-character stop string and the token whose text first contains it.
  const std::string full = tokenizer_->Decode(out);
  const std::string stop = full.substr(1, 1);
  size_t first = 0;
  while (tokenizer_->Decode(ReferenceOutput(first + 1)).find(stop) == std::string::npos) ++first;
  v1::GenerateRequest r = Greedy();
  r.mutable_sampling_params()->add_stop(stop);
  r.mutable_sampling_params()->set_min_tokens(static_cast<uint32_t>(first + 2));
  const StreamedSequence seq = Run(r);
  // The text runs past the first occurrence; it is cut before the first
  // occurrence that ends in the text of token min_tokens or later.
  EXPECT_GT(seq.text.size(), full.find(stop));
  EXPECT_GE(seq.token_ids.size(), first + 2);
  EXPECT_EQ(seq.text, full.substr(0, seq.text.size()));
  if (seq.finish.reason() == v1::FINISH_REASON_STOP) {
    EXPECT_EQ(seq.finish.stop_string(), stop);
    EXPECT_EQ(full.substr(seq.text.size(), stop.size()), stop);
  } else {
    EXPECT_EQ(seq.text, full);
  }
}

TEST_F(RequestOptionsTest, IncludeStopStrInOutputKeepsWhatEndedTheSequence) {
  const std::vector<TokenId> out = ReferenceOutput(kMaxTokens);
  const std::string full = tokenizer_->Decode(out);
  // A stop string: included, the text ends with it.
  const std::string stop = full.substr(full.size() / 2, 4);
  v1::GenerateRequest r = Greedy();
  r.mutable_sampling_params()->add_stop(stop);
  r.mutable_sampling_params()->set_include_stop_str_in_output(true);
  StreamedSequence seq = Run(r);
  EXPECT_EQ(seq.text, full.substr(0, full.find(stop) + stop.size()));
  EXPECT_EQ(seq.finish.stop_string(), stop);

  // A stop token id: its text is included.
  v1::GenerateRequest by_id = Greedy();
  by_id.mutable_sampling_params()->add_stop_token_ids(out[5]);
  by_id.mutable_sampling_params()->set_include_stop_str_in_output(true);
  seq = Run(by_id);
  const size_t at = std::find(out.begin(), out.end(), out[5]) - out.begin();
  EXPECT_EQ(seq.text, tokenizer_->Decode(ReferenceOutput(at + 1)));
  EXPECT_EQ(seq.finish.stop_token_id(), out[5]);
}

TEST_F(RequestOptionsTest, SpecialTokensShowOnlyWhenAskedFor) {
  v1::GenerateRequest r = Greedy();
  (*r.mutable_sampling_params()->mutable_logit_bias())[kEos] = 100.0f;
  r.mutable_sampling_params()->set_min_tokens(2);
  const std::string two = tokenizer_->Decode(ReferenceOutput(2));
  // Skipped by default; shown when not skipped only if the ending token's
  // text is included (vLLM leaves EOS out otherwise).
  EXPECT_EQ(Run(r).text, two);
  r.mutable_sampling_params()->set_skip_special_tokens(false);
  EXPECT_EQ(Run(r).text, two);
  r.mutable_sampling_params()->set_include_stop_str_in_output(true);
  EXPECT_EQ(Run(r).text, two + "<|end_of_text|>");
  r.mutable_sampling_params()->set_skip_special_tokens(true);
  EXPECT_EQ(Run(r).text, two);

  // A special token in the middle of the text (forced by a bias, EOS ignored).
  v1::GenerateRequest mid = Greedy(3);
  mid.mutable_sampling_params()->set_ignore_eos(true);
  (*mid.mutable_sampling_params()->mutable_logit_bias())[kEos] = 100.0f;
  mid.mutable_sampling_params()->set_skip_special_tokens(false);
  EXPECT_EQ(Run(mid).text, "<|end_of_text|><|end_of_text|><|end_of_text|>");
  mid.mutable_sampling_params()->clear_skip_special_tokens();
  EXPECT_EQ(Run(mid).text, "");
}

// A priority is honoured only by the priority policy; under FCFS, where it
// would be ignored, it is refused (as vLLM does).
TEST_F(RequestOptionsTest, PriorityNeedsThePriorityPolicy) {
  v1::GenerateRequest r = Greedy(4);
  r.mutable_sampling_params()->set_priority(-5);
  auto refused = engine_->Submit(r, std::make_shared<RecordingSink>());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::HasSubstr("sampling_params.priority"));

  EngineSetup setup;
  setup.policy = SchedulingPolicy::kPriority;
  std::unique_ptr<Engine> by_priority = MakeDemoEngine(setup);
  ASSERT_NE(by_priority, nullptr);
  Submitted s = Submit(*by_priority, r);
  ASSERT_TRUE(s.sink->Wait());
  const std::vector<StreamedSequence> seqs = Reassemble(s.sink->responses());
  ASSERT_EQ(seqs.size(), 1u);
  EXPECT_EQ(seqs[0].token_ids, ReferenceOutput(4));
  ExpectDrained(*by_priority, 256);
}

// prompt_logprobs scores the prompt itself: the first chunk carries one entry
// per prompt token after the first. Scoring the reference's prompt followed
// by its greedy output must give that output's log-probs, which the
// reference computed with torch (never our code).
TEST_F(RequestOptionsTest, PromptLogprobsScoreThePromptInTheFirstChunk) {
  constexpr int kScored = 12;  // reference output tokens appended to the prompt
  v1::GenerateRequest r;
  for (TokenId t : reference_.prompt_ids) r.mutable_token_ids()->add_ids(t);
  for (int i = 0; i < kScored; ++i) r.mutable_token_ids()->add_ids(reference_.output_ids[i]);
  r.mutable_sampling_params()->set_temperature(0);
  r.mutable_sampling_params()->set_max_tokens(2);
  r.mutable_sampling_params()->set_prompt_logprobs(3);

  // Twice: the second time the prompt is in the prefix cache, but scoring
  // computes every position again.
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(::testing::Message() << "round " << round);
    Submitted s = Submit(*engine_, r);
    ASSERT_TRUE(s.sink->Wait());
    ASSERT_TRUE(s.sink->error().ok()) << s.sink->error();
    const std::vector<v1::GenerateResponse> responses = s.sink->responses();
    ASSERT_GE(responses.size(), 2u);
    ASSERT_TRUE(responses[0].has_chunk());
    const auto& scored = responses[0].chunk().prompt_logprobs();
    const size_t prompt_len = reference_.prompt_ids.size() + kScored;
    ASSERT_EQ(static_cast<size_t>(scored.size()), prompt_len - 1);
    for (size_t i = 0; i + 1 < prompt_len; ++i) {
      const v1::TokenLogprob& t = scored[static_cast<int>(i)];
      SCOPED_TRACE(::testing::Message() << "prompt token " << i + 1);
      EXPECT_EQ(t.token_id(), r.token_ids().ids(static_cast<int>(i + 1)));
      EXPECT_LE(t.logprob(), 0.0f);
      ASSERT_EQ(t.top_logprobs_size(), 3);
      // The top list is best first and no token beats its first entry.
      EXPECT_GE(t.top_logprobs(0).logprob(), t.top_logprobs(1).logprob());
      EXPECT_GE(t.top_logprobs(1).logprob(), t.top_logprobs(2).logprob());
      EXPECT_LE(t.logprob(), t.top_logprobs(0).logprob() + 1e-6f);
    }
    // The appended output tokens score as the reference generated them
    // (greedy: each is the top token there).
    for (int k = 0; k < kScored; ++k) {
      const v1::TokenLogprob& t = scored[static_cast<int>(reference_.prompt_ids.size()) - 1 + k];
      EXPECT_NEAR(t.logprob(), reference_.logprobs[k], 1e-3) << "output token " << k;
      EXPECT_EQ(t.top_logprobs(0).token_id(), reference_.output_ids[k]) << "output token " << k;
    }
    // Later chunks carry none; nothing was served from the prefix cache.
    for (size_t m = 1; m < responses.size(); ++m) {
      if (responses[m].has_chunk()) {
        EXPECT_EQ(responses[m].chunk().prompt_logprobs_size(), 0);
      }
    }
    ASSERT_TRUE(responses.back().has_finished());
    EXPECT_EQ(responses.back().finished().usage().cached_prompt_tokens(), 0u);
    // And the generation goes on from the scored prompt as the reference did.
    const std::vector<StreamedSequence> seqs = Reassemble(responses);
    ASSERT_EQ(seqs.size(), 1u);
    EXPECT_EQ(seqs[0].token_ids, (std::vector<TokenId>{reference_.output_ids[kScored],
                                                       reference_.output_ids[kScored + 1]}));
  }
  // A request without prompt_logprobs still finds the prompt cached.
  r.mutable_sampling_params()->clear_prompt_logprobs();
  Submitted s = Submit(*engine_, r);
  ASSERT_TRUE(s.sink->Wait());
  const std::vector<v1::GenerateResponse> responses = s.sink->responses();
  ASSERT_FALSE(responses.empty());
  ASSERT_TRUE(responses.back().has_finished());
  EXPECT_GT(responses.back().finished().usage().cached_prompt_tokens(), 0u);
  for (const v1::GenerateResponse& m : responses) {
    if (m.has_chunk()) {
      EXPECT_EQ(m.chunk().prompt_logprobs_size(), 0);
    }
  }
}

// best_of > n reports its ranked sequences once, at the end: the prompt's
// scores come in that one chunk.
TEST_F(RequestOptionsTest, PromptLogprobsComeWithRankedResults) {
  v1::GenerateRequest r = Greedy(3);
  r.mutable_sampling_params()->set_temperature(0.8f);
  r.mutable_sampling_params()->set_seed(7);
  r.mutable_sampling_params()->set_n(1);
  r.mutable_sampling_params()->set_best_of(3);
  r.mutable_sampling_params()->set_prompt_logprobs(0);
  Submitted s = Submit(*engine_, r);
  ASSERT_TRUE(s.sink->Wait());
  ASSERT_TRUE(s.sink->error().ok()) << s.sink->error();
  int chunks_with_scores = 0;
  for (const v1::GenerateResponse& m : s.sink->responses()) {
    if (!m.has_chunk() || m.chunk().prompt_logprobs_size() == 0) continue;
    ++chunks_with_scores;
    EXPECT_EQ(m.chunk().deltas_size(), 1);
    ASSERT_EQ(static_cast<size_t>(m.chunk().prompt_logprobs_size()),
              reference_.prompt_ids.size() - 1);
    for (const v1::TokenLogprob& t : m.chunk().prompt_logprobs()) {
      EXPECT_EQ(t.top_logprobs_size(), 0);  // prompt_logprobs 0: the token's own only
    }
  }
  EXPECT_EQ(chunks_with_scores, 1);
}

}  // namespace
}  // namespace folio
