// Parallel sampling (n, best_of), beam search and stop conditions, through
// the scheduler and a SimulatedWorker: fan-out shares the prompt's blocks,
// outputs stream or are ranked as the request asks, every request ends with
// the right finish reason.

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/beam_search.h"
#include "scheduler/scheduler.h"
#include "scheduler/simulated_worker.h"
#include "tests/scheduler/scheduler_test_util.h"

namespace folio {
namespace {

using ::testing::HasSubstr;
using test::ExpectDrained;
using test::MakeRequest;
using test::OutputCollector;
using test::TestConfig;

int32_t DeviceUsed(const Scheduler& s) { return s.kv_cache().device_pool().num_used_blocks(); }

// Blocks the live sequences would hold without sharing.
int32_t UnsharedBlocks(const Scheduler& s) {
  int32_t n = 0;
  for (const Request* r : s.RunningRequests()) {
    for (const auto& seq : r->seqs) n += seq->block_table().size();
  }
  return n;
}

RequestSpec Parallel(RequestId id, int32_t prompt_len, int32_t max_tokens, int32_t n,
                     int32_t best_of) {
  RequestSpec r = MakeRequest(id, prompt_len, max_tokens);
  r.sampling.n = n;
  r.sampling.best_of = best_of;
  return r;
}

RequestSpec Beam(RequestId id, int32_t prompt_len, int32_t max_tokens, int32_t width) {
  RequestSpec r = MakeRequest(id, prompt_len, max_tokens);
  r.sampling.beam_width = width;
  r.sampling.n = width;
  r.sampling.best_of = width;
  return r;
}

// n=3: one prefill samples 3 first tokens (one best_of fan-out), then three
// sequences stream deltas every step, sharing the prompt's blocks.
TEST(SchedulerSamplingTest, ParallelSamplingStreamsSequencesSharingThePrompt) {
  for (int32_t prompt_len : {40, 36}) {  // block-aligned, and a partly filled last block
    SchedulerConfig c = TestConfig(64);
    auto s = test::MakeScheduler(c);
    SimulatedWorker w(test::WorkerOptions(c));
    FOLIO_ASSERT_OK(s->AddRequest(Parallel(1, prompt_len, 6, 3, 3)));
    OutputCollector out;
    StepPlan plan;
    StepResult result;
    FOLIO_ASSERT_OK(test::Step(*s, w, out, &plan, &result));
    ASSERT_EQ(plan.scheduled.size(), 1u);
    EXPECT_EQ(plan.scheduled[0].sample_mode, SampleMode::kSample);
    EXPECT_EQ(plan.scheduled[0].num_samples, 3);
    ASSERT_EQ(result.samples.size(), 1u);
    ASSERT_EQ(result.samples[0].tokens.size(), 3u);
    const test::CollectedRequest& r = out.at(1);
    ASSERT_EQ(r.sequences.size(), 3u);
    for (int32_t i = 0; i < 3; ++i) {
      EXPECT_THAT(r.tokens(i), ::testing::ElementsAre(result.samples[0].tokens[i].token_id));
    }
    const int32_t prompt_blocks = (prompt_len + 7) / 8;
    EXPECT_EQ(DeviceUsed(*s), prompt_blocks);
    EXPECT_EQ(s->num_running_sequences(), 3);

    FOLIO_ASSERT_OK(test::Step(*s, w, out, &plan, &result));
    ASSERT_EQ(plan.scheduled.size(), 3u);
    EXPECT_EQ(plan.new_sequences.size(), 2u);  // the two forks
    if (prompt_len % 8 == 0) {
      // Each sequence adds its own block; the prompt stays shared.
      EXPECT_TRUE(plan.copies.empty());
      EXPECT_EQ(DeviceUsed(*s), prompt_blocks + 3);
    } else {
      // Two copy the shared last block, the third writes it in place.
      EXPECT_EQ(plan.copies.size(), 2u);
      EXPECT_EQ(DeviceUsed(*s), prompt_blocks + 2);
    }
    EXPECT_EQ(UnsharedBlocks(*s), 3 * prompt_blocks + (prompt_len % 8 == 0 ? 3 : 0));
    EXPECT_LT(DeviceUsed(*s), UnsharedBlocks(*s));
    FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 50));
    EXPECT_EQ(r.num_outputs, 6);  // a delta every step
    for (int32_t i = 0; i < 3; ++i) {
      EXPECT_EQ(r.tokens(i).size(), 6u);
      EXPECT_EQ(r.reason(i), FinishReason::kLength);
    }
    EXPECT_NE(r.tokens(0), r.tokens(1));
    EXPECT_NE(r.tokens(1), r.tokens(2));
    EXPECT_EQ(r.num_output_tokens, 18);
    ExpectDrained(*s);
  }
}

// best_of=4, n=2: nothing until the end, then the two best by cumulative
// log-prob, which are the top two of the same four samples streamed by n=4.
TEST(SchedulerSamplingTest, BestOfReturnsTopNByCumulativeLogprobAtTheEnd) {
  SchedulerConfig c = TestConfig(64);
  SimulatedWorker::Options wo = test::WorkerOptions(c);
  wo.eos_token_id = 2;
  wo.eos_probability = 0.08;  // varied lengths
  for (bool eos : {false, true}) {
    auto s = test::MakeScheduler(c);
    SimulatedWorker w(wo);
    RequestSpec best = Parallel(1, 10, 12, 2, 4);
    best.eos_token_ids = {2};
    best.sampling.ignore_eos = !eos;
    RequestSpec all = Parallel(2, 10, 12, 4, 4);
    all.prompt = best.prompt;
    all.eos_token_ids = {2};
    all.sampling.ignore_eos = !eos;
    FOLIO_ASSERT_OK(s->AddRequest(best));
    OutputCollector out;
    int32_t steps = 0;
    while (s->HasUnfinishedRequests()) {
      ASSERT_LT(++steps, 50);
      FOLIO_ASSERT_OK(test::Step(*s, w, out));
      if (s->HasUnfinishedRequests()) {
        EXPECT_FALSE(out.contains(1)) << "output before the end";
      }
    }
    const test::CollectedRequest& r = out.at(1);
    EXPECT_EQ(r.num_outputs, 1);
    ASSERT_EQ(r.sequences.size(), 2u);
    EXPECT_GE(r.sequences.at(0).cumulative_logprob, r.sequences.at(1).cumulative_logprob);
    ExpectDrained(*s);

    FOLIO_ASSERT_OK(s->AddRequest(all));
    FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 50));
    const test::CollectedRequest& a = out.at(2);
    ASSERT_EQ(a.sequences.size(), 4u);
    std::vector<test::CollectedSequence> ranked;
    for (const auto& [i, seq] : a.sequences) ranked.push_back(seq);
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) {
      return x.cumulative_logprob > y.cumulative_logprob;
    });
    for (int32_t i = 0; i < 2; ++i) {
      EXPECT_EQ(r.tokens(i), ranked[i].token_ids) << i;
      EXPECT_EQ(r.reason(i), ranked[i].finish_reason) << i;
      EXPECT_DOUBLE_EQ(r.sequences.at(i).cumulative_logprob, ranked[i].cumulative_logprob);
    }
    if (eos) {
      bool some_eos = false;
      for (const auto& seq : ranked) some_eos |= seq.finish_reason == FinishReason::kEos;
      EXPECT_TRUE(some_eos);
    }
    EXPECT_EQ(r.num_output_tokens,
              static_cast<int32_t>(r.tokens(0).size() + r.tokens(1).size()));
    ExpectDrained(*s);
  }
}

void ExpectRankedByScore(const test::CollectedRequest& r, float length_penalty) {
  double prev = 1e300;
  for (const auto& [i, seq] : r.sequences) {
    ASSERT_FALSE(seq.token_ids.empty()) << i;
    const double score = BeamScore(seq.cumulative_logprob, static_cast<int32_t>(seq.token_ids.size()),
                                   length_penalty);
    EXPECT_LE(score, prev + 1e-9) << "beam " << i << " out of score order";
    prev = score;
    double sum = 0;
    for (float lp : seq.logprobs) sum += lp;
    EXPECT_NEAR(sum, seq.cumulative_logprob, 1e-3);
    EXPECT_NE(seq.finish_reason, FinishReason::kNone);
  }
}

// Beam search, width 2 and 4: the request returns n beams in score order,
// once, at the end; the beams share blocks while they run.
TEST(SchedulerSamplingTest, BeamSearchReturnsRankedBeamsAndSharesBlocks) {
  for (int32_t width : {2, 4}) {
    SchedulerConfig c = TestConfig(128);
    auto s = test::MakeScheduler(c);
    SimulatedWorker::Options wo = test::WorkerOptions(c);
    wo.beam_logprob_spread = 0.3;
    SimulatedWorker w(wo);
    FOLIO_ASSERT_OK(s->AddRequest(Beam(1, 20, 12, width)));
    int32_t max_live = 0;
    int32_t shared_steps = 0;
    auto out = test::RunToCompletion(*s, w, 100, [&](const StepPlan& p, const Scheduler& sc) {
      if (!sc.HasUnfinishedRequests()) return;
      max_live = std::max(max_live, sc.num_running_sequences());
      EXPECT_LE(sc.num_running_sequences(), width);
      for (const ScheduledSequence& work : p.scheduled) {
        if (work.sample_mode != SampleMode::kNone) {
          EXPECT_EQ(work.sample_mode, SampleMode::kBeamCandidates);
          EXPECT_EQ(work.num_samples, 2 * width);
        }
      }
      if (DeviceUsed(sc) < UnsharedBlocks(sc)) ++shared_steps;
    });
    FOLIO_ASSERT_OK(out.status());
    EXPECT_EQ(max_live, width);
    EXPECT_GT(shared_steps, 5);
    const test::CollectedRequest& r = out->at(1);
    EXPECT_EQ(r.num_outputs, 1);
    ASSERT_EQ(r.sequences.size(), static_cast<size_t>(width));
    for (const auto& [i, seq] : r.sequences) {
      EXPECT_EQ(seq.token_ids.size(), 12u);
      EXPECT_EQ(seq.finish_reason, FinishReason::kLength);
    }
    ExpectRankedByScore(r, 1.0f);
    EXPECT_EQ(r.num_output_tokens, 12 * width);
    ExpectDrained(*s);
  }
}

// n < beam_width returns only the best n.
TEST(SchedulerSamplingTest, BeamSearchReturnsOnlyTheBestN) {
  SchedulerConfig c = TestConfig(128);
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  RequestSpec full = Beam(1, 20, 8, 4);
  RequestSpec one = Beam(2, 20, 8, 4);
  one.prompt = full.prompt;
  one.sampling.n = 1;
  one.sampling.best_of = 1;
  FOLIO_ASSERT_OK(s->AddRequest(full));
  FOLIO_ASSERT_OK(s->AddRequest(one));
  auto out = test::RunToCompletion(*s, w, 100);
  FOLIO_ASSERT_OK(out.status());
  ASSERT_EQ(out->at(1).sequences.size(), 4u);
  ASSERT_EQ(out->at(2).sequences.size(), 1u);
  EXPECT_EQ(out->at(2).tokens(0), out->at(1).tokens(0));
  ExpectDrained(*s);
}

// End tokens finish hypotheses: with a tiny vocabulary the beams meet EOS and
// stop tokens; finished hypotheses carry their reasons and end tokens.
TEST(SchedulerSamplingTest, BeamSearchEndTokensFinishHypotheses) {
  SchedulerConfig c = TestConfig(128);
  SimulatedWorker::Options wo = test::WorkerOptions(c);
  wo.vocab_size = 7;
  int32_t eos_seen = 0;
  int32_t stop_seen = 0;
  for (RequestId id = 0; id < 8; ++id) {
    auto s = test::MakeScheduler(c);
    SimulatedWorker w(wo);
    RequestSpec r = Beam(id, 10 + id, 40, 3);
    r.eos_token_ids = {4};
    r.sampling.ignore_eos = false;
    r.sampling.stop_token_ids = {5};
    r.sampling.length_penalty = 0.5f;
    FOLIO_ASSERT_OK(s->AddRequest(r));
    auto out = test::RunToCompletion(*s, w, 100);
    FOLIO_ASSERT_OK(out.status());
    const test::CollectedRequest& got = out->at(id);
    ASSERT_EQ(got.sequences.size(), 3u);
    ExpectRankedByScore(got, 0.5f);
    for (const auto& [i, seq] : got.sequences) {
      switch (seq.finish_reason) {
        case FinishReason::kEos:
          ++eos_seen;
          EXPECT_EQ(seq.token_ids.back(), 4);
          break;
        case FinishReason::kStop:
          ++stop_seen;
          EXPECT_EQ(seq.token_ids.back(), 5);
          break;
        case FinishReason::kLength:
          EXPECT_EQ(seq.token_ids.size(), 40u);
          break;
        default:
          ADD_FAILURE() << "unexpected reason " << FinishReasonName(seq.finish_reason);
      }
      // Only the last token may be an end token.
      for (size_t t = 0; t + 1 < seq.token_ids.size(); ++t) {
        EXPECT_NE(seq.token_ids[t], 4);
        EXPECT_NE(seq.token_ids[t], 5);
      }
    }
    ExpectDrained(*s);
  }
  EXPECT_GT(eos_seen, 0);
  EXPECT_GT(stop_seen, 0);
}

// Beams survive preemption: a starved engine (swap or recompute) returns the
// same beams as an ample one.
// Beam search with min_tokens: no hypothesis ends before min_tokens tokens;
// end tokens among earlier candidates just continue their beams.
TEST(SchedulerSamplingTest, BeamSearchHoldsEndTokensUntilMinTokens) {
  SchedulerConfig c = TestConfig(128);
  SimulatedWorker::Options wo = test::WorkerOptions(c);
  wo.vocab_size = 7;
  int32_t ended = 0, held_off = 0;
  for (RequestId id = 0; id < 8; ++id) {
    auto s = test::MakeScheduler(c);
    SimulatedWorker w(wo);
    RequestSpec r = Beam(id, 10 + id, 30, 3);
    r.eos_token_ids = {4};
    r.sampling.ignore_eos = false;
    r.sampling.stop_token_ids = {5};
    r.sampling.min_tokens = 6;
    FOLIO_ASSERT_OK(s->AddRequest(r));
    auto out = test::RunToCompletion(*s, w, 100);
    FOLIO_ASSERT_OK(out.status());
    const test::CollectedRequest& got = out->at(id);
    ASSERT_EQ(got.sequences.size(), 3u);
    for (const auto& [i, seq] : got.sequences) {
      ASSERT_GE(seq.token_ids.size(), 6u) << FinishReasonName(seq.finish_reason);
      if (seq.finish_reason != FinishReason::kLength) {
        ++ended;
        EXPECT_TRUE(seq.token_ids.back() == 4 || seq.token_ids.back() == 5);
      }
      for (size_t t = 0; t + 1 < seq.token_ids.size(); ++t) {
        const bool end = seq.token_ids[t] == 4 || seq.token_ids[t] == 5;
        if (end) {
          EXPECT_LT(t + 1, 6u) << "an end token past min_tokens did not end the beam";
        }
        held_off += end;
      }
    }
    ExpectDrained(*s);
  }
  EXPECT_GT(ended, 0);
  EXPECT_GT(held_off, 0);
}

TEST(SchedulerSamplingTest, BeamsAndSamplesSurvivePreemption) {
  std::vector<RequestSpec> specs;
  for (RequestId id = 0; id < 3; ++id) specs.push_back(Beam(id, 14 + 5 * id, 20, 3));
  for (RequestId id = 3; id < 5; ++id) specs.push_back(Parallel(id, 9 + id, 25, 2, 3));
  auto run = [&](const SchedulerConfig& c, SchedulerStats* stats) {
    auto s = test::MakeScheduler(c);
    SimulatedWorker w(test::WorkerOptions(c));
    for (const RequestSpec& r : specs) EXPECT_TRUE(s->AddRequest(r).ok());
    auto out = test::RunToCompletion(*s, w, 2000);
    EXPECT_TRUE(out.ok()) << out.status();
    *stats = s->stats();
    ExpectDrained(*s);
    return out.ok() ? *out : OutputCollector();
  };
  SchedulerStats stats;
  const OutputCollector reference = run(TestConfig(400), &stats);
  for (PreemptionMode mode : {PreemptionMode::kSwap, PreemptionMode::kRecompute}) {
    SchedulerConfig c = TestConfig(24);
    c.preemption_mode = mode;
    c.num_host_blocks = 40;
    const OutputCollector got = run(c, &stats);
    EXPECT_GT(stats.num_preemptions_recompute + stats.num_preemptions_swap, 0)
        << PreemptionModeName(mode);
    for (RequestId id = 0; id < 5; ++id) {
      ASSERT_EQ(got.at(id).sequences.size(), reference.at(id).sequences.size()) << id;
      for (const auto& [i, seq] : reference.at(id).sequences) {
        EXPECT_EQ(got.at(id).tokens(i), seq.token_ids) << PreemptionModeName(mode) << " " << id;
      }
    }
  }
}

// A beam-search request alone in a pool too small for its beams ends by
// length with the beams it has, not with nothing.
TEST(SchedulerSamplingTest, BeamSearchOutOfBlocksReturnsItsBeams) {
  SchedulerConfig c = TestConfig(6);
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  FOLIO_ASSERT_OK(s->AddRequest(Beam(1, 20, 100, 2)));
  auto out = test::RunToCompletion(*s, w, 200);
  FOLIO_ASSERT_OK(out.status());
  const test::CollectedRequest& r = out->at(1);
  EXPECT_THAT(r.error, HasSubstr("KV cache"));
  ASSERT_EQ(r.sequences.size(), 2u);
  for (const auto& [i, seq] : r.sequences) {
    EXPECT_EQ(seq.finish_reason, FinishReason::kLength);
    EXPECT_GT(seq.token_ids.size(), 3u);
  }
  ExpectRankedByScore(r, 1.0f);
  ExpectDrained(*s);
}

// --- Stop conditions ------------------------------------------------------

TEST(SchedulerSamplingTest, EosEndsASequenceUnlessIgnored) {
  SchedulerConfig c = TestConfig(128);
  SimulatedWorker::Options wo = test::WorkerOptions(c);
  wo.eos_token_id = 2;
  wo.eos_probability = 0.15;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(wo);
  for (RequestId id = 0; id < 6; ++id) {
    RequestSpec r = MakeRequest(id, 8 + id, 100);
    r.eos_token_ids = {2};
    r.sampling.ignore_eos = id >= 3;
    FOLIO_ASSERT_OK(s->AddRequest(r));
  }
  auto out = test::RunToCompletion(*s, w, 200);
  FOLIO_ASSERT_OK(out.status());
  for (RequestId id = 0; id < 6; ++id) {
    const std::vector<TokenId>& t = out->at(id).tokens();
    ASSERT_FALSE(t.empty());
    if (id < 3) {
      EXPECT_EQ(out->at(id).reason(), FinishReason::kEos) << id;
      EXPECT_EQ(t.back(), 2);
      EXPECT_EQ(std::count(t.begin(), t.end(), 2), 1);
      EXPECT_LT(t.size(), 100u);
    } else {
      EXPECT_EQ(out->at(id).reason(), FinishReason::kLength) << id;
      EXPECT_EQ(t.size(), 100u);
      EXPECT_GT(std::count(t.begin(), t.end(), 2), 1);  // EOS sampled, and ignored
    }
  }
  ExpectDrained(*s);
}

// min_tokens: EOS and stop token ids end nothing before it (the simulated
// worker does not ban them as the real sampler does, so they do come), and
// the workers learn which tokens to ban.
TEST(SchedulerSamplingTest, MinTokensHoldsOffEndTokens) {
  SchedulerConfig c = TestConfig(128);
  SimulatedWorker::Options wo = test::WorkerOptions(c);
  wo.vocab_size = 8;
  wo.eos_token_id = 2;
  wo.eos_probability = 0.3;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(wo);
  for (RequestId id = 0; id < 6; ++id) {
    RequestSpec r = MakeRequest(id, 8 + id, 60);
    r.eos_token_ids = {2};
    r.sampling.ignore_eos = id % 2 == 1;
    r.sampling.stop_token_ids = {5};
    r.sampling.min_tokens = 12;
    FOLIO_ASSERT_OK(s->AddRequest(r));
    const Request* added = s->FindRequest(id);
    ASSERT_NE(added, nullptr);
    // EOS is banned even when ignored (vLLM's min_tokens does the same).
    EXPECT_EQ(added->spec.sampling.end_token_ids, (std::vector<TokenId>{2, 5}));
  }
  auto out = test::RunToCompletion(*s, w, 300);
  FOLIO_ASSERT_OK(out.status());
  int ended_early = 0, held_off = 0;
  for (RequestId id = 0; id < 6; ++id) {
    const std::vector<TokenId>& t = out->at(id).tokens();
    ASSERT_GE(t.size(), 12u) << id;
    // It ended at the first end token at or past position min_tokens.
    const bool eos = id % 2 == 0;
    auto ends = [&](TokenId x) { return x == 5 || (eos && x == 2); };
    size_t first = 11;
    while (first < t.size() && !ends(t[first])) ++first;
    if (first < t.size()) {
      EXPECT_EQ(t.size(), first + 1) << id;
      EXPECT_EQ(out->at(id).reason(), t.back() == 2 ? FinishReason::kEos : FinishReason::kStop);
      ++ended_early;
    } else {
      EXPECT_EQ(out->at(id).reason(), FinishReason::kLength) << id;
    }
    // End tokens that came before min_tokens did not end it.
    held_off += std::any_of(t.begin(), t.begin() + 11, ends);
  }
  EXPECT_GT(ended_early, 0);
  EXPECT_GT(held_off, 0);
  ExpectDrained(*s);
}

TEST(SchedulerSamplingTest, StopTokenIdsEndWithStop) {
  SchedulerConfig c = TestConfig(64);
  SimulatedWorker::Options wo = test::WorkerOptions(c);
  wo.vocab_size = 6;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(wo);
  for (RequestId id = 0; id < 4; ++id) {
    RequestSpec r = MakeRequest(id, 5 + id, 200);
    r.sampling.stop_token_ids = {3, 4};
    r.eos_token_ids = {3};
    r.sampling.ignore_eos = true;  // 3 is EOS, ignored, but still a stop token
    FOLIO_ASSERT_OK(s->AddRequest(r));
  }
  auto out = test::RunToCompletion(*s, w, 300);
  FOLIO_ASSERT_OK(out.status());
  for (RequestId id = 0; id < 4; ++id) {
    const std::vector<TokenId>& t = out->at(id).tokens();
    ASSERT_FALSE(t.empty());
    EXPECT_EQ(out->at(id).reason(), FinishReason::kStop) << id;
    EXPECT_TRUE(t.back() == 3 || t.back() == 4);
    for (size_t i = 0; i + 1 < t.size(); ++i) EXPECT_TRUE(t[i] != 3 && t[i] != 4);
  }
  ExpectDrained(*s);
}

TEST(SchedulerSamplingTest, MaxTokensAndMaxModelLenEndWithLength) {
  SchedulerConfig c = TestConfig(64);
  c.max_model_len = 40;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, 10, 7)));    // max_tokens
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(2, 30, 100)));  // max_model_len: 10 more
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(3, 39, 100)));  // exactly one token fits
  RequestSpec par = Parallel(4, 35, 100, 2, 2);
  FOLIO_ASSERT_OK(s->AddRequest(par));
  auto out = test::RunToCompletion(*s, w, 100);
  FOLIO_ASSERT_OK(out.status());
  EXPECT_EQ(out->at(1).tokens().size(), 7u);
  EXPECT_EQ(out->at(2).tokens().size(), 10u);
  EXPECT_EQ(out->at(3).tokens().size(), 1u);
  for (RequestId id = 1; id <= 3; ++id) {
    EXPECT_EQ(out->at(id).reason(), FinishReason::kLength);
    EXPECT_TRUE(out->at(id).error.empty());
  }
  for (int32_t i = 0; i < 2; ++i) {
    EXPECT_EQ(out->at(4).tokens(i).size(), 5u);
    EXPECT_EQ(out->at(4).reason(i), FinishReason::kLength);
  }
  ExpectDrained(*s);
}

// n=2 with EOS: sequences end at different steps, each delta stream ends
// with its own reason, and the request ends when the last one does.
TEST(SchedulerSamplingTest, ParallelSequencesFinishIndependently) {
  SchedulerConfig c = TestConfig(128);
  SimulatedWorker::Options wo = test::WorkerOptions(c);
  wo.eos_token_id = 2;
  wo.eos_probability = 0.1;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(wo);
  RequestSpec r = Parallel(1, 12, 60, 4, 4);
  r.eos_token_ids = {2};
  r.sampling.ignore_eos = false;
  FOLIO_ASSERT_OK(s->AddRequest(r));
  OutputCollector out;
  std::vector<int32_t> live_per_step;
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 100, [&](const StepPlan&, const Scheduler& sc) {
    live_per_step.push_back(sc.num_running_sequences());
  }));
  const test::CollectedRequest& got = out.at(1);
  ASSERT_EQ(got.sequences.size(), 4u);
  std::vector<size_t> lens;
  for (const auto& [i, seq] : got.sequences) {
    lens.push_back(seq.token_ids.size());
    if (seq.finish_reason == FinishReason::kEos) {
      EXPECT_EQ(seq.token_ids.back(), 2);
    } else {
      EXPECT_EQ(seq.finish_reason, FinishReason::kLength);
      EXPECT_EQ(seq.token_ids.size(), 60u);
    }
  }
  std::sort(lens.begin(), lens.end());
  EXPECT_NE(lens.front(), lens.back());  // they did not all end together
  EXPECT_TRUE(std::is_sorted(live_per_step.rbegin(), live_per_step.rend()));
  EXPECT_EQ(got.num_outputs, static_cast<int32_t>(lens.back()));
  ExpectDrained(*s);
}

// A stop string ends one sequence of n: the engine stops it in the
// scheduler, which frees it while the others go on; stopping the last one
// finishes the request. Ranked requests (best_of > n) are left alone.
TEST(SchedulerSamplingTest, StopSequenceEndsOneOfParallelSequences) {
  SchedulerConfig c = TestConfig(128);
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  FOLIO_ASSERT_OK(s->AddRequest(Parallel(1, 12, 40, 3, 3)));
  FOLIO_ASSERT_OK(s->AddRequest(Parallel(2, 12, 40, 1, 2)));
  OutputCollector out;
  for (int i = 0; i < 5; ++i) FOLIO_ASSERT_OK(test::Step(*s, w, out));
  const int32_t running = s->num_running_sequences();
  const int32_t used = DeviceUsed(*s);
  EXPECT_FALSE(s->StopSequence(2, 0));  // ranked: its outputs come at the end
  EXPECT_FALSE(s->StopSequence(1, 7));  // no such sequence
  EXPECT_TRUE(s->StopSequence(1, 1));
  EXPECT_FALSE(s->StopSequence(1, 1));  // already stopped
  EXPECT_EQ(s->num_running_sequences(), running - 1);
  EXPECT_LT(DeviceUsed(*s), used);  // its own blocks are free
  for (int i = 0; i < 3; ++i) FOLIO_ASSERT_OK(test::Step(*s, w, out));
  EXPECT_TRUE(s->StopSequence(1, 0));
  EXPECT_TRUE(s->StopSequence(1, 2));  // the last one: the request finishes
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 100));
  const test::CollectedRequest& got = out.at(1);
  EXPECT_TRUE(got.finished);
  EXPECT_EQ(got.tokens(1).size(), 5u);  // nothing after it was stopped
  EXPECT_EQ(got.tokens(0).size(), 8u);
  EXPECT_EQ(got.reason(2), FinishReason::kStop);
  EXPECT_EQ(out.at(2).sequences.size(), 1u);
  ExpectDrained(*s);
}

}  // namespace
}  // namespace folio
