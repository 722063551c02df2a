// ScorePrompts' call pattern, with fake LM-head and scoring callbacks: which
// rows each chunk scores, and that a failure on rank 0 keeps every rank's
// collective calls in step (a partner rank would wait in the collective).
#include "worker/prompt_logprobs.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace folio {
namespace {

using ::testing::ElementsAre;

// One sequence whose 150-token prompt is scheduled in two chunks of 100 and
// 50 (rows 0..99 and 100..149 of the batch), then a second sequence that
// asks for no scores.
struct Fixture {
  StepPlan plan;
  ForwardBatch batch;
  MirroredSequence scored, plain;
  std::vector<const MirroredSequence*> seqs;

  Fixture() {
    scored.num_prompt_tokens = 150;
    for (int32_t i = 0; i < 150; ++i) scored.tokens.push_back(i % 7);
    scored.sampling.prompt_logprobs = 2;
    plain.num_prompt_tokens = 3;
    plain.tokens = {1, 2, 3};
    ScheduledSequence chunk;
    chunk.seq_id = 11;
    chunk.start_position = 0;
    chunk.prompt_logprobs = true;
    for (int32_t i = 0; i < 100; ++i) chunk.token_ids.push_back(i % 7);
    plan.scheduled.push_back(chunk);
    ScheduledSequence other;
    other.seq_id = 12;
    other.token_ids = {1, 2, 3};
    plan.scheduled.push_back(other);
    batch.query_start = {0, 100, 103};
    seqs = {&scored, &plain};
  }
};

TEST(ScorePromptsTest, ScoresEveryPositionThatPredictsAPromptToken) {
  Fixture f;
  std::vector<std::vector<int32_t>> calls;
  const RowLogitsFn logits_of = [&](std::span<const int32_t> rows) {
    calls.emplace_back(rows.begin(), rows.end());
    return absl::OkStatus();
  };
  std::vector<TokenId> targets;
  const ScoreRowsFn score = [&](std::span<const TokenId> t, int32_t num_top,
                                std::vector<SampledToken>* out) {
    EXPECT_EQ(num_top, 2);
    for (TokenId id : t) {
      targets.push_back(id);
      out->push_back({id, -1.0f, {}});
    }
    return absl::OkStatus();
  };
  std::vector<PromptLogprobs> out;
  ASSERT_TRUE(ScorePrompts(f.plan, f.batch, f.seqs, 10, 64, true, logits_of, score, &out).ok());
  // 100 positions predict tokens 1..100: rows 0..63, then 64..99.
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].size(), 64u);
  EXPECT_EQ(calls[1].front(), 64);
  EXPECT_EQ(calls[1].back(), 99);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seq_id, 11);
  EXPECT_EQ(out[0].first_index, 1);
  ASSERT_EQ(out[0].tokens.size(), 100u);
  EXPECT_EQ(targets.front(), 1);   // prompt token 1
  EXPECT_EQ(targets.back(), 100 % 7);
}

TEST(ScorePromptsTest, ARank0ScoringFailureWaitsForEveryCollectiveCall) {
  Fixture f;
  int collective_calls = 0, score_calls = 0;
  const RowLogitsFn logits_of = [&](std::span<const int32_t>) {
    ++collective_calls;
    return absl::OkStatus();
  };
  const ScoreRowsFn failing = [&](std::span<const TokenId>, int32_t,
                                  std::vector<SampledToken>*) {
    ++score_calls;
    return absl::ResourceExhaustedError("no memory for the workspace");
  };
  std::vector<PromptLogprobs> out;
  const absl::Status s =
      ScorePrompts(f.plan, f.batch, f.seqs, 10, 64, /*score=*/true, logits_of, failing, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(collective_calls, 2);  // as many as the other ranks make
  EXPECT_EQ(score_calls, 1);       // no more scoring after the failure

  // Another rank: the same collective calls, no scoring.
  collective_calls = score_calls = 0;
  out.clear();
  ASSERT_TRUE(
      ScorePrompts(f.plan, f.batch, f.seqs, 10, 64, /*score=*/false, logits_of, failing, &out)
          .ok());
  EXPECT_EQ(collective_calls, 2);
  EXPECT_EQ(score_calls, 0);
  EXPECT_TRUE(out.empty());

  // A failed collective call returns at once (every rank sees it).
  collective_calls = 0;
  const RowLogitsFn broken = [&](std::span<const int32_t>) {
    ++collective_calls;
    return absl::InternalError("nccl");
  };
  EXPECT_EQ(ScorePrompts(f.plan, f.batch, f.seqs, 10, 64, true, broken, failing, &out).code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(collective_calls, 1);
}

}  // namespace
}  // namespace folio
