// SimulatedWorker: the worker stand-in must reject wrong plans (unknown
// sequences, short tables, wrong KV mappings, lost copies or swaps) and
// sample deterministically from a sequence's content.

#include "scheduler/simulated_worker.h"

#include <optional>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace folio {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int32_t kBs = 4;

SimulatedWorker::Options Opts(uint64_t seed = 1) {
  SimulatedWorker::Options o;
  o.block_size = kBs;
  o.num_device_blocks = 8;
  o.num_host_blocks = 4;
  o.vocab_size = 1000;
  o.seed = seed;
  return o;
}

NewSequenceData NewSeq(SequenceId id, std::vector<TokenId> tokens, std::vector<BlockId> blocks,
                       int32_t computed = 0) {
  NewSequenceData n;
  n.seq_id = id;
  n.request_id = id;
  n.prompt_token_ids = std::move(tokens);
  n.block_ids = std::move(blocks);
  n.num_computed_tokens = computed;
  return n;
}

ScheduledSequence Work(SequenceId id, int32_t start, const std::vector<TokenId>& tokens,
                       SampleMode mode = SampleMode::kSample, int32_t num_samples = 1) {
  ScheduledSequence w;
  w.seq_id = id;
  w.start_position = start;
  w.token_ids.assign(tokens.begin(), tokens.end());
  w.sample_mode = mode;
  w.num_samples = num_samples;
  return w;
}

std::string ErrorOf(const absl::StatusOr<StepResult>& r) {
  return r.ok() ? "OK" : std::string(r.status().message());
}

// Prefills sequence 1 = {10..15} into blocks {2, 5}.
StepResult PrefillSeq1(SimulatedWorker& w) {
  StepPlan plan;
  plan.step_id = 1;
  plan.new_sequences.push_back(NewSeq(1, {10, 11, 12, 13, 14, 15}, {2, 5}));
  plan.scheduled.push_back(Work(1, 0, {10, 11, 12, 13, 14, 15}));
  absl::StatusOr<StepResult> r = w.Execute(plan);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : StepResult{};
}

TEST(SimulatedWorkerTest, PrefillAndDecodeThroughDiffs) {
  SimulatedWorker w(Opts());
  StepResult r = PrefillSeq1(w);
  EXPECT_EQ(r.step_id, 1u);
  ASSERT_EQ(r.samples.size(), 1u);
  EXPECT_EQ(r.samples[0].seq_id, 1);
  ASSERT_EQ(r.samples[0].tokens.size(), 1u);
  EXPECT_GE(r.samples[0].tokens[0].token_id, 0);
  EXPECT_LT(r.samples[0].tokens[0].token_id, 1000);
  EXPECT_LE(r.samples[0].tokens[0].logprob, 0.0f);
  EXPECT_EQ(w.num_mirrored_sequences(), 1u);
  ASSERT_NE(w.MirrorBlockTable(1), nullptr);
  EXPECT_THAT(*w.MirrorBlockTable(1), ElementsAre(2, 5));
  EXPECT_EQ(w.MirrorBlockTable(2), nullptr);

  // Decode positions 6, 7 into block 5, then 8 into a newly appended block.
  TokenId next = r.samples[0].tokens[0].token_id;
  for (int32_t pos = 6; pos <= 8; ++pos) {
    StepPlan plan;
    plan.step_id = pos;
    if (pos == 8) plan.cached_sequences.push_back({1, 2, {6}, 8});
    plan.scheduled.push_back(Work(1, pos, {next}));
    absl::StatusOr<StepResult> d = w.Execute(plan);
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_EQ(d->samples.size(), 1u);
    next = d->samples[0].tokens[0].token_id;
  }
  EXPECT_THAT(*w.MirrorBlockTable(1), ElementsAre(2, 5, 6));
}

TEST(SimulatedWorkerTest, ChunkWithoutSampleModeReturnsNoSamples) {
  SimulatedWorker w(Opts());
  StepPlan plan;
  plan.new_sequences.push_back(NewSeq(1, {1, 2, 3, 4, 5}, {0, 1}));
  plan.scheduled.push_back(Work(1, 0, {1, 2, 3}, SampleMode::kNone, 0));
  absl::StatusOr<StepResult> r = w.Execute(plan);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->samples.empty());
  StepPlan rest;
  rest.scheduled.push_back(Work(1, 3, {4, 5}));
  r = w.Execute(rest);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->samples.size(), 1u);
}

TEST(SimulatedWorkerTest, RejectsAnUnknownSequence) {
  SimulatedWorker w(Opts());
  StepPlan plan;
  plan.scheduled.push_back(Work(99, 0, {1}));
  EXPECT_THAT(ErrorOf(w.Execute(plan)), HasSubstr("unknown sequence 99"));

  StepPlan diff;
  diff.cached_sequences.push_back({42, 0, {1}, 0});
  EXPECT_THAT(ErrorOf(w.Execute(diff)), HasSubstr("diff for unknown sequence 42"));
}

TEST(SimulatedWorkerTest, RejectsAFinishedSequence) {
  SimulatedWorker w(Opts());
  PrefillSeq1(w);
  StepPlan done;
  done.finished_seq_ids.push_back(1);
  ASSERT_TRUE(w.Execute(done).ok());
  EXPECT_EQ(w.num_mirrored_sequences(), 0u);
  StepPlan plan;
  plan.scheduled.push_back(Work(1, 6, {7}));
  EXPECT_THAT(ErrorOf(w.Execute(plan)), HasSubstr("unknown sequence 1"));
}

TEST(SimulatedWorkerTest, RejectsASequenceSentTwice) {
  SimulatedWorker w(Opts());
  PrefillSeq1(w);
  StepPlan again;
  again.new_sequences.push_back(NewSeq(1, {10}, {3}));
  EXPECT_THAT(ErrorOf(w.Execute(again)), HasSubstr("already mirrored"));
}

TEST(SimulatedWorkerTest, RejectsABlockTableTooShort) {
  SimulatedWorker w(Opts());
  StepPlan plan;
  plan.new_sequences.push_back(NewSeq(1, {1, 2, 3, 4, 5, 6}, {2}));
  plan.scheduled.push_back(Work(1, 0, {1, 2, 3, 4, 5, 6}));
  EXPECT_THAT(ErrorOf(w.Execute(plan)), HasSubstr("1 blocks cannot hold 6 tokens"));
}

TEST(SimulatedWorkerTest, RejectsABlockOutsideThePool) {
  SimulatedWorker w(Opts());
  StepPlan plan;
  plan.new_sequences.push_back(NewSeq(1, {1, 2, 3, 4, 5}, {2, 8}));
  plan.scheduled.push_back(Work(1, 0, {1, 2, 3, 4, 5}));
  EXPECT_THAT(ErrorOf(w.Execute(plan)), HasSubstr("outside the pool"));
  StepPlan negative;
  negative.new_sequences.push_back(NewSeq(2, {1}, {kNoBlock}));
  negative.scheduled.push_back(Work(2, 0, {1}));
  EXPECT_THAT(ErrorOf(w.Execute(negative)), HasSubstr("outside the pool"));
}

TEST(SimulatedWorkerTest, RejectsTokensThatDisagreeWithTheMirror) {
  SimulatedWorker w(Opts());
  PrefillSeq1(w);
  StepPlan plan;
  plan.scheduled.push_back(Work(1, 4, {14, 99}));  // position 5 holds 15
  EXPECT_THAT(ErrorOf(w.Execute(plan)), HasSubstr("token at 5 is 99 but the mirror has 15"));
  StepPlan beyond;
  beyond.scheduled.push_back(Work(1, 8, {1}));  // positions 6, 7 skipped
  EXPECT_THAT(ErrorOf(w.Execute(beyond)), HasSubstr("start 8 beyond"));
}

TEST(SimulatedWorkerTest, RejectsABadTableOffsetAndOutOfRangeOps) {
  SimulatedWorker w(Opts());
  PrefillSeq1(w);
  StepPlan offset;
  offset.cached_sequences.push_back({1, 3, {7}, 6});  // table has 2 entries
  EXPECT_THAT(ErrorOf(w.Execute(offset)), HasSubstr("bad table offset"));
  StepPlan copy;
  copy.copies.push_back({2, 8});
  EXPECT_THAT(ErrorOf(w.Execute(copy)), HasSubstr("copy op 2->8 out of range"));
  StepPlan out;
  out.swap_out.push_back({2, 4});  // host has 4 blocks
  EXPECT_THAT(ErrorOf(w.Execute(out)), HasSubstr("swap-out"));
  StepPlan in;
  in.swap_in.push_back({-1, 0});
  EXPECT_THAT(ErrorOf(w.Execute(in)), HasSubstr("swap-in"));
}

// A sequence claiming cached tokens in a block that never received them (a
// wrong prefix hit, a wrong block id) is caught when it "attends".
TEST(SimulatedWorkerTest, DetectsAKvMismatch) {
  SimulatedWorker w(Opts());
  PrefillSeq1(w);  // {10..13} in block 2, {14, 15} in block 5

  // Right: sharing block 2, which holds tokens 10..13 at positions 0..3.
  StepPlan good;
  good.new_sequences.push_back(NewSeq(2, {10, 11, 12, 13, 20}, {2, 3}, 4));
  good.scheduled.push_back(Work(2, 4, {20}));
  ASSERT_TRUE(w.Execute(good).ok());

  // Wrong: the same tokens claimed to be in block 4, which is empty.
  StepPlan bad;
  bad.new_sequences.push_back(NewSeq(3, {10, 11, 12, 13, 20}, {4, 6}, 4));
  bad.scheduled.push_back(Work(3, 4, {20}));
  EXPECT_THAT(ErrorOf(w.Execute(bad)), HasSubstr("KV at position 0 (block 4)"));

  // Wrong: block 5 holds other tokens (14, 15 at positions 4, 5).
  StepPlan other;
  other.new_sequences.push_back(NewSeq(4, {14, 15, 16}, {5}, 2));
  other.scheduled.push_back(Work(4, 2, {16}));
  EXPECT_THAT(ErrorOf(w.Execute(other)), HasSubstr("KV at position 0 (block 5)"));
}

// Two sequences sharing a partial block both write into it: without a
// copy-on-write the first one's next step sees the other's token.
TEST(SimulatedWorkerTest, DetectsAMissedCopyOnWrite) {
  for (bool with_copy : {false, true}) {
    SimulatedWorker w(Opts());
    StepPlan prefill;
    prefill.new_sequences.push_back(NewSeq(1, {1, 2, 3}, {2}));
    prefill.scheduled.push_back(Work(1, 0, {1, 2, 3}, SampleMode::kNone, 0));
    ASSERT_TRUE(w.Execute(prefill).ok());

    StepPlan fork;
    fork.new_sequences.push_back(NewSeq(2, {1, 2, 3}, {2}, 3));  // shares block 2
    fork.scheduled.push_back(Work(1, 3, {7}, SampleMode::kNone, 0));
    fork.scheduled.push_back(Work(2, 3, {8}, SampleMode::kNone, 0));
    if (with_copy) {
      fork.copies.push_back({2, 6});
      fork.cached_sequences.push_back({1, 0, {6}, 3});
    }
    ASSERT_TRUE(w.Execute(fork).ok());

    StepPlan next;
    next.cached_sequences.push_back({1, 1, {with_copy ? 3 : 4}, 4});
    next.scheduled.push_back(Work(1, 4, {9}, SampleMode::kNone, 0));
    absl::StatusOr<StepResult> r = w.Execute(next);
    if (with_copy) {
      EXPECT_TRUE(r.ok()) << r.status();
    } else {
      EXPECT_THAT(ErrorOf(r), HasSubstr("KV at position 3 (block 2) holds token 8"));
    }
  }
}

TEST(SimulatedWorkerTest, SwapRoundTripKeepsTheKvAndALostBlockIsCaught) {
  for (bool lose_one : {false, true}) {
    SimulatedWorker w(Opts());
    StepResult first = PrefillSeq1(w);
    StepPlan out;
    out.swap_out = {{2, 0}, {5, 1}};
    out.preempted_seq_ids = {1};
    ASSERT_TRUE(w.Execute(out).ok());
    EXPECT_EQ(w.num_mirrored_sequences(), 0u);

    // Something else overwrites the old device blocks meanwhile.
    StepPlan other;
    other.new_sequences.push_back(NewSeq(9, {90, 91, 92, 93, 94, 95}, {2, 5}));
    other.scheduled.push_back(Work(9, 0, {90, 91, 92, 93, 94, 95}, SampleMode::kNone, 0));
    ASSERT_TRUE(w.Execute(other).ok());

    StepPlan in;
    in.swap_in = {{0, 6}};
    if (!lose_one) in.swap_in.push_back({1, 7});
    NewSequenceData resumed = NewSeq(1, {10, 11, 12, 13, 14, 15}, {6, 7}, 6);
    resumed.output_token_ids = {first.samples[0].tokens[0].token_id};
    in.new_sequences.push_back(resumed);
    in.scheduled.push_back(Work(1, 6, {first.samples[0].tokens[0].token_id}));
    absl::StatusOr<StepResult> r = w.Execute(in);
    if (lose_one) {
      EXPECT_THAT(ErrorOf(r), HasSubstr("KV at position 4 (block 7)"));
    } else {
      EXPECT_TRUE(r.ok()) << r.status();
    }
  }
}

TEST(SimulatedWorkerTest, WithoutKvVerificationOnlyTheMirrorIsChecked) {
  SimulatedWorker::Options o = Opts();
  o.verify_kv = false;
  SimulatedWorker w(o);
  StepPlan bad;
  bad.new_sequences.push_back(NewSeq(3, {10, 11, 12, 13, 20}, {4, 6}, 4));
  bad.scheduled.push_back(Work(3, 4, {20}));
  EXPECT_TRUE(w.Execute(bad).ok());
  StepPlan short_table;
  short_table.new_sequences.push_back(NewSeq(4, {1, 2, 3, 4, 5}, {1}));
  short_table.scheduled.push_back(Work(4, 0, {1, 2, 3, 4, 5}));
  EXPECT_THAT(ErrorOf(w.Execute(short_table)), HasSubstr("cannot hold"));
}

// ------------------------------------------------------------- sampling

std::vector<SampledToken> SampleOnce(const SimulatedWorker::Options& o, SequenceId id,
                                     const std::vector<TokenId>& tokens,
                                     SampleMode mode = SampleMode::kSample, int32_t n = 1,
                                     std::optional<uint64_t> request_seed = std::nullopt) {
  SimulatedWorker w(o);
  StepPlan plan;
  NewSequenceData data = NewSeq(id, tokens, {0, 1, 2, 3});
  data.sampling.seed = request_seed;
  plan.new_sequences.push_back(data);
  plan.scheduled.push_back(Work(id, 0, tokens, mode, n));
  absl::StatusOr<StepResult> r = w.Execute(plan);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok() || r->samples.empty()) return {};
  return r->samples[0].tokens;
}

bool SameTokens(const std::vector<SampledToken>& a, const std::vector<SampledToken>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].token_id != b[i].token_id || a[i].logprob != b[i].logprob) return false;
  }
  return true;
}

TEST(SimulatedWorkerSamplingTest, DeterministicForTheSameContent) {
  const std::vector<TokenId> t = {5, 6, 7, 8, 9};
  const auto a = SampleOnce(Opts(), 1, t, SampleMode::kSample, 3);
  const auto b = SampleOnce(Opts(), 1, t, SampleMode::kSample, 3);
  const auto other_id = SampleOnce(Opts(), 77, t, SampleMode::kSample, 3);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_TRUE(SameTokens(a, b));
  EXPECT_TRUE(SameTokens(a, other_id));  // content, not identity
}

TEST(SimulatedWorkerSamplingTest, DependsOnContentSeedAndRequestSeed) {
  const std::vector<TokenId> t = {5, 6, 7, 8, 9};
  const auto base = SampleOnce(Opts(1), 1, t, SampleMode::kSample, 4);
  // Different content: over a handful of variations, not all equal to base.
  int same = 0;
  for (TokenId last = 10; last < 20; ++last) {
    std::vector<TokenId> u = t;
    u.back() = last;
    same += SameTokens(SampleOnce(Opts(1), 1, u, SampleMode::kSample, 4), base);
  }
  EXPECT_LT(same, 10);
  EXPECT_FALSE(SameTokens(SampleOnce(Opts(2), 1, t, SampleMode::kSample, 4), base));
  const auto seeded = SampleOnce(Opts(1), 1, t, SampleMode::kSample, 4, 1234);
  EXPECT_FALSE(SameTokens(seeded, base));
  EXPECT_TRUE(SameTokens(SampleOnce(Opts(1), 1, t, SampleMode::kSample, 4, 1234), seeded));
  EXPECT_FALSE(SameTokens(SampleOnce(Opts(1), 1, t, SampleMode::kSample, 4, 1235), seeded));
}

// A sequence recomputed after preemption (resent in full, other blocks)
// draws exactly the tokens it drew before.
TEST(SimulatedWorkerSamplingTest, RecomputeRepeatsTheSamples) {
  SimulatedWorker w(Opts());
  StepResult first = PrefillSeq1(w);
  StepPlan pre;
  pre.preempted_seq_ids = {1};
  ASSERT_TRUE(w.Execute(pre).ok());
  StepPlan again;
  again.new_sequences.push_back(NewSeq(1, {10, 11, 12, 13, 14, 15}, {0, 7}));
  again.scheduled.push_back(Work(1, 0, {10, 11, 12, 13, 14, 15}));
  absl::StatusOr<StepResult> second = w.Execute(again);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->samples.size(), 1u);
  EXPECT_TRUE(SameTokens(second->samples[0].tokens, first.samples[0].tokens));
}

TEST(SimulatedWorkerSamplingTest, BeamCandidatesAreDistinctAndBestFirst) {
  const std::vector<TokenId> t = {1, 2, 3};
  const auto c = SampleOnce(Opts(), 1, t, SampleMode::kBeamCandidates, 6);
  ASSERT_EQ(c.size(), 6u);
  std::set<TokenId> distinct;
  for (size_t i = 0; i < c.size(); ++i) {
    distinct.insert(c[i].token_id);
    EXPECT_LE(c[i].logprob, 0.0f);
    if (i > 0) {
      EXPECT_LE(c[i].logprob, c[i - 1].logprob);
    }
  }
  EXPECT_EQ(distinct.size(), 6u);
  EXPECT_TRUE(SameTokens(SampleOnce(Opts(), 1, t, SampleMode::kBeamCandidates, 6), c));
}

TEST(SimulatedWorkerSamplingTest, MoreBeamCandidatesThanTheVocabularyIsAnError) {
  SimulatedWorker::Options o = Opts();
  o.vocab_size = 5;
  SimulatedWorker w(o);
  StepPlan plan;
  plan.new_sequences.push_back(NewSeq(1, {1, 2}, {0}));
  plan.scheduled.push_back(Work(1, 0, {1, 2}, SampleMode::kBeamCandidates, 6));
  EXPECT_THAT(ErrorOf(w.Execute(plan)), HasSubstr("6 beam candidates from a vocabulary of 5"));
  // All five is fine: every token once.
  SimulatedWorker w2(o);
  plan.scheduled[0].num_samples = 5;
  absl::StatusOr<StepResult> r = w2.Execute(plan);
  ASSERT_TRUE(r.ok()) << r.status();
  std::set<TokenId> distinct;
  for (const SampledToken& t : r->samples[0].tokens) distinct.insert(t.token_id);
  EXPECT_EQ(distinct.size(), 5u);
}

TEST(SimulatedWorkerSamplingTest, EosProbability) {
  SimulatedWorker::Options o = Opts();
  o.eos_token_id = 3;
  o.eos_probability = 1.0;
  for (TokenId x = 0; x < 20; ++x) {
    for (const SampledToken& s : SampleOnce(o, 1, {x, x + 1}, SampleMode::kSample, 2)) {
      EXPECT_EQ(s.token_id, 3);
    }
  }
  o.eos_probability = 0.0;
  int eos = 0;
  for (TokenId x = 0; x < 20; ++x) {
    for (const SampledToken& s : SampleOnce(o, 1, {x, x + 1}, SampleMode::kSample, 2)) {
      eos += s.token_id == 3;
    }
  }
  EXPECT_LT(eos, 5);  // only by chance, 1 in 1000 per draw
}

}  // namespace
}  // namespace folio
