// Prompt scoring (SamplingParams::prompt_logprobs) through the scheduler and a
// SimulatedWorker, whose scores are a pure function of the prompt prefix they
// score. Every prompt token 1..P-1 must be scored and reported exactly once,
// in order, on the right output; chunking, batching, preemption and the
// prefix cache must not change the scores; a worker answering wrongly is an
// internal error. Runs are compared with each other and with what the worker
// answered, never with values copied from the implementation.

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "scheduler/simulated_worker.h"
#include "tests/scheduler/scheduler_test_util.h"

namespace folio {
namespace {

using test::ExpectDrained;
using test::MakeRequest;
using test::TestConfig;

// What one request's outputs carried of its prompt scores.
struct Delivery {
  int32_t num_outputs = 0;         // RequestOutputs seen
  int32_t num_deliveries = 0;      // of them, those with prompt_logprobs
  int32_t delivered_on = -1;       // index of the first output that had them
  int32_t first_with_tokens = -1;  // index of the first output carrying a token
  bool delivered_on_final = false;
  std::vector<SampledToken> scores;
};

// Everything a run recorded, beyond test::OutputCollector's own checks.
struct Record {
  test::OutputCollector out;
  std::map<RequestId, Delivery> delivered;
  // Per request and prompt index: how often the worker scored it, and its
  // first score (what the request must report: repeats are only dropped).
  std::map<RequestId, std::map<int32_t, int32_t>> times_scored;
  std::map<RequestId, std::map<int32_t, SampledToken>> worker_scores;
  std::map<RequestId, int32_t> scoring_chunks;  // plan entries that scored
  // Preemptions (either mode) of a request whose prompt was partly scored.
  int32_t partly_scored_preemptions = 0;
  SchedulerStats stats;
};

// A worker-answer editor for the broken-worker tests: returns true when it
// changed `result`.
using Tamper = std::function<bool(const StepPlan& plan, StepResult& result)>;

// Drives a Scheduler and a SimulatedWorker step by step, keeping a Record.
class Driver {
 public:
  explicit Driver(const SchedulerConfig& config)
      : s_(test::MakeScheduler(config)), w_(test::WorkerOptions(config)) {}

  Scheduler& scheduler() { return *s_; }
  Record& run() { return run_; }
  bool tampered() const { return tampered_; }

  absl::Status Add(const RequestSpec& spec) { return s_->AddRequest(spec); }

  // One iteration: Schedule, worker (its answer optionally edited), Update.
  absl::Status Step(const Tamper& tamper = nullptr) {
    StepPlan plan = s_->Schedule();
    if (absl::Status st = test::CheckPlan(plan, *s_); !st.ok()) return st;
    for (const NewSequenceData& n : plan.new_sequences) request_of_[n.seq_id] = n.request_id;
    CountPartlyScoredPreemptions(plan);
    absl::StatusOr<StepResult> result = w_.Execute(plan);
    if (!result.ok()) return result.status();
    if (absl::Status st = CheckMirroredTables(plan); !st.ok()) return st;
    if (tamper && tamper(plan, *result)) tampered_ = true;
    RecordWorkerScores(*result);
    absl::StatusOr<std::vector<RequestOutput>> outputs = s_->Update(*result);
    if (!outputs.ok()) return outputs.status();
    RecordDeliveries(*outputs);
    return run_.out.Add(*outputs);
  }

  absl::Status Drain(int32_t max_steps) {
    for (int32_t step = 0; s_->HasUnfinishedRequests(); ++step) {
      if (step >= max_steps) return absl::DeadlineExceededError("not drained");
      if (absl::Status st = Step(); !st.ok()) return st;
    }
    run_.stats = s_->stats();
    return absl::OkStatus();
  }

 private:
  // As test::Step: the worker's block tables equal the scheduler's.
  absl::Status CheckMirroredTables(const StepPlan& plan) const {
    absl::flat_hash_map<SequenceId, const Sequence*> live;
    for (const Request* r : s_->RunningRequests()) {
      for (const auto& seq : r->seqs) live[seq->id()] = seq.get();
    }
    for (const ScheduledSequence& work : plan.scheduled) {
      auto it = live.find(work.seq_id);
      const std::vector<BlockId>* mirror = w_.MirrorBlockTable(work.seq_id);
      if (it == live.end() || mirror == nullptr ||
          *mirror != it->second->block_table().blocks()) {
        return absl::InternalError(absl::StrCat("sequence ", work.seq_id,
                                                ": worker block table differs"));
      }
    }
    return absl::OkStatus();
  }

  void CountPartlyScoredPreemptions(const StepPlan& plan) {
    absl::flat_hash_set<RequestId> seen;
    for (SequenceId id : plan.preempted_seq_ids) {
      const RequestId rid = request_of_.at(id);
      const Request* r = s_->FindRequest(rid);
      if (r == nullptr || !seen.insert(rid).second) continue;
      const size_t scored = r->prompt_logprobs.size();
      if (scored > 0 && scored + 1 < r->spec.prompt.size()) ++run_.partly_scored_preemptions;
    }
  }

  void RecordWorkerScores(const StepResult& result) {
    for (const PromptLogprobs& p : result.prompt_logprobs) {
      auto it = request_of_.find(p.seq_id);
      if (it == request_of_.end()) continue;  // a tampered id
      const RequestId rid = it->second;
      ++run_.scoring_chunks[rid];
      // Scoring is asked for only where it brings new positions: a chunk
      // recomputed wholly within the scored prefix is not scored again.
      std::map<int32_t, int32_t>& times = run_.times_scored[rid];
      const int32_t last = p.first_index + static_cast<int32_t>(p.tokens.size()) - 1;
      if (!tampered_ && !times.empty() && last <= times.rbegin()->first) {
        ADD_FAILURE() << "request " << rid << " re-scored prompt tokens " << p.first_index
                      << ".." << last << ", all scored before";
      }
      for (size_t i = 0; i < p.tokens.size(); ++i) {
        const int32_t index = p.first_index + static_cast<int32_t>(i);
        ++times[index];
        run_.worker_scores[rid].try_emplace(index, p.tokens[i]);
      }
    }
  }

  void RecordDeliveries(const std::vector<RequestOutput>& outputs) {
    for (const RequestOutput& out : outputs) {
      Delivery& d = run_.delivered[out.request_id];
      const int32_t index = d.num_outputs++;
      bool has_tokens = false;
      for (const SequenceOutput& seq : out.sequences) has_tokens |= !seq.token_ids.empty();
      if (has_tokens && d.first_with_tokens < 0) d.first_with_tokens = index;
      if (out.prompt_logprobs == nullptr) continue;
      ++d.num_deliveries;
      if (d.delivered_on < 0) {
        d.delivered_on = index;
        d.delivered_on_final = out.finished;
        d.scores = *out.prompt_logprobs;
      }
    }
  }

  std::unique_ptr<Scheduler> s_;
  SimulatedWorker w_;
  Record run_;
  std::map<SequenceId, RequestId> request_of_;
  bool tampered_ = false;
};

// Runs `specs` (all queued up front) to completion; the pool must drain.
Record RunAll(const SchedulerConfig& config, const std::vector<RequestSpec>& specs,
           int32_t max_steps = 5000) {
  Driver d(config);
  for (const RequestSpec& spec : specs) {
    const absl::Status added = d.Add(spec);
    EXPECT_TRUE(added.ok()) << added;
  }
  const absl::Status drained = d.Drain(max_steps);
  EXPECT_TRUE(drained.ok()) << drained;
  ExpectDrained(d.scheduler());
  return d.run();
}

RequestSpec Scoring(RequestId id, int32_t prompt_len, int32_t max_tokens, int32_t top,
                    int32_t base = -1) {
  RequestSpec r = MakeRequest(id, prompt_len, max_tokens, base);
  r.sampling.prompt_logprobs = top;
  return r;
}

// Exact equality: the simulated worker is deterministic, so any difference
// (a token, a log-prob, an alternative) is a scheduling bug.
testing::AssertionResult SameScores(const std::vector<SampledToken>& a,
                                    const std::vector<SampledToken>& b) {
  if (a.size() != b.size()) {
    return testing::AssertionFailure() << a.size() << " vs " << b.size() << " entries";
  }
  for (size_t i = 0; i < a.size(); ++i) {
    const SampledToken& x = a[i];
    const SampledToken& y = b[i];
    bool same = x.token_id == y.token_id && x.logprob == y.logprob &&
                x.top_logprobs.size() == y.top_logprobs.size();
    for (size_t k = 0; same && k < x.top_logprobs.size(); ++k) {
      same = x.top_logprobs[k].token_id == y.top_logprobs[k].token_id &&
             x.top_logprobs[k].logprob == y.top_logprobs[k].logprob;
    }
    if (!same) {
      return testing::AssertionFailure() << "entry " << i << " (prompt token " << i + 1
                                         << ") differs: token " << x.token_id << "/" << y.token_id
                                         << ", logprob " << x.logprob << "/" << y.logprob;
    }
  }
  return testing::AssertionSuccess();
}

// The request was scored completely and reported once: prompt tokens
// 1..P-1 in order, each with its `top` alternatives, each as the worker
// first scored it; and every prompt index the worker scored is in 1..P-1.
void ExpectCompleteScores(const Record& run, const RequestSpec& spec) {
  SCOPED_TRACE(testing::Message() << "request " << spec.id);
  ASSERT_TRUE(run.delivered.contains(spec.id));
  const Delivery& d = run.delivered.at(spec.id);
  ASSERT_EQ(d.num_deliveries, 1);
  const size_t p = spec.prompt.size();
  ASSERT_EQ(d.scores.size(), p - 1);
  const auto& worker = run.worker_scores.contains(spec.id)
                           ? run.worker_scores.at(spec.id)
                           : std::map<int32_t, SampledToken>{};
  EXPECT_EQ(worker.size(), p - 1) << "prompt indices the worker scored";
  std::vector<SampledToken> from_worker;
  for (const auto& [index, t] : worker) {
    EXPECT_GE(index, 1);
    EXPECT_LT(index, static_cast<int32_t>(p));
    from_worker.push_back(t);
  }
  EXPECT_TRUE(SameScores(d.scores, from_worker));
  for (size_t i = 0; i < d.scores.size(); ++i) {
    EXPECT_EQ(d.scores[i].token_id, spec.prompt[i + 1]) << "entry " << i;
    EXPECT_EQ(d.scores[i].top_logprobs.size(),
              static_cast<size_t>(*spec.sampling.prompt_logprobs))
        << "entry " << i;
    EXPECT_TRUE(std::isfinite(d.scores[i].logprob) && d.scores[i].logprob <= 0.0f)
        << "entry " << i << ": " << d.scores[i].logprob;
  }
}

// Without preemption no prompt position is scored twice.
void ExpectEachScoredOnce(const Record& run, RequestId id) {
  ASSERT_TRUE(run.times_scored.contains(id)) << id;
  for (const auto& [index, times] : run.times_scored.at(id)) {
    EXPECT_EQ(times, 1) << "request " << id << " prompt index " << index;
  }
}

void ExpectNoScores(const Record& run, RequestId id) {
  EXPECT_FALSE(run.times_scored.contains(id)) << "request " << id << " was scored";
  if (run.delivered.contains(id)) {
    EXPECT_EQ(run.delivered.at(id).num_deliveries, 0) << "request " << id;
  }
}

void ExpectSameScoresAcrossRuns(const Record& a, const Record& b,
                                const std::vector<RequestSpec>& specs) {
  for (const RequestSpec& spec : specs) {
    if (!spec.sampling.prompt_logprobs.has_value()) continue;
    ASSERT_TRUE(a.delivered.contains(spec.id) && b.delivered.contains(spec.id)) << spec.id;
    EXPECT_TRUE(SameScores(a.delivered.at(spec.id).scores, b.delivered.at(spec.id).scores))
        << "request " << spec.id;
  }
}

// n=1 and n=3 streaming requests, chunked or not, beside one that does not
// score: each scoring request gets prompt tokens 1..P-1 once, in order, on
// its first output, which is the first that carries tokens.
TEST(SchedulerPromptLogprobsTest, EveryPromptTokenScoredOnceInOrderOnTheFirstOutput) {
  for (int32_t budget : {512, 16}) {
    SCOPED_TRACE(testing::Message() << "budget " << budget);
    SchedulerConfig c = TestConfig(256);
    c.max_num_batched_tokens = budget;
    std::vector<RequestSpec> specs;
    for (int32_t len : {2, 9, 16, 17, 40}) {
      specs.push_back(Scoring(static_cast<RequestId>(specs.size()), len, 5, 3));
    }
    RequestSpec fan = Scoring(static_cast<RequestId>(specs.size()), 23, 4, 5);
    fan.sampling.n = 3;
    fan.sampling.best_of = 3;
    specs.push_back(fan);
    const RequestId plain = static_cast<RequestId>(specs.size());
    specs.push_back(MakeRequest(plain, 30, 5));

    const Record run = RunAll(c, specs);
    for (const RequestSpec& spec : specs) {
      if (spec.id == plain) continue;
      ExpectCompleteScores(run, spec);
      ExpectEachScoredOnce(run, spec.id);
      const Delivery& d = run.delivered.at(spec.id);
      EXPECT_EQ(d.delivered_on, 0) << spec.id;
      EXPECT_EQ(d.first_with_tokens, 0) << spec.id;
      EXPECT_GT(d.num_outputs, 1) << spec.id;  // so "first" means something
    }
    ExpectNoScores(run, plain);
    if (budget == 16) {
      EXPECT_GT(run.scoring_chunks.at(4), 1) << "the long prompt was not chunked";
    }
  }
}

// One chunk, small chunks (5 and 7 tokens), and a crowd of other requests
// sharing the budget all give the same scores.
TEST(SchedulerPromptLogprobsTest, ChunkingAndBatchingDoNotChangeTheScores) {
  std::vector<RequestSpec> specs;
  specs.push_back(Scoring(0, 3, 4, 2));
  specs.push_back(Scoring(1, 17, 4, 5));
  specs.push_back(Scoring(2, 33, 4, 1));
  specs.push_back(Scoring(3, 50, 4, 20));
  auto config = [](int32_t budget) {
    SchedulerConfig c = TestConfig(256);
    c.max_num_batched_tokens = budget;
    return c;
  };
  // Alone, so every prompt is one chunk.
  std::vector<Record> whole;
  for (const RequestSpec& spec : specs) whole.push_back(RunAll(config(512), {spec}));
  for (size_t i = 0; i < specs.size(); ++i) {
    ExpectCompleteScores(whole[i], specs[i]);
    EXPECT_EQ(whole[i].scoring_chunks.at(specs[i].id), 1);
  }
  auto expect_like_whole = [&](const Record& run) {
    for (size_t i = 0; i < specs.size(); ++i) {
      ExpectCompleteScores(run, specs[i]);
      EXPECT_TRUE(SameScores(run.delivered.at(specs[i].id).scores,
                             whole[i].delivered.at(specs[i].id).scores))
          << "request " << specs[i].id;
    }
  };
  for (int32_t budget : {5, 7}) {
    SCOPED_TRACE(testing::Message() << "budget " << budget);
    const Record chunked = RunAll(config(budget), specs);
    expect_like_whole(chunked);
    EXPECT_GT(chunked.scoring_chunks.at(3), 5);
  }
  // Mixed: decoding and prefilling requests, scoring or not, share the steps.
  std::vector<RequestSpec> mixed;
  for (RequestId id = 10; id < 16; ++id) {
    mixed.push_back(id % 2 ? MakeRequest(id, 5 + 3 * id, 30) : Scoring(id, 4 + id, 20, 3));
  }
  mixed.insert(mixed.begin() + 3, specs.begin(), specs.end());
  const Record crowded = RunAll(config(24), mixed);
  expect_like_whole(crowded);
  for (const RequestSpec& spec : mixed) {
    if (spec.sampling.prompt_logprobs.has_value()) {
      ExpectCompleteScores(crowded, spec);
      ExpectEachScoredOnce(crowded, spec.id);
    } else {
      ExpectNoScores(crowded, spec.id);
    }
  }
}

// A pool far too small for the workload: recompute and swap preemption,
// several times and of requests whose prompts were only partly scored, give
// the scores (and tokens) of a roomy run.
TEST(SchedulerPromptLogprobsTest, PreemptionDoesNotChangeTheScores) {
  std::vector<RequestSpec> specs;
  for (RequestId id = 0; id < 9; ++id) {
    RequestSpec r = id % 4 == 3 ? MakeRequest(id, 20 + 4 * id, 40)
                                : Scoring(id, 20 + 4 * id, 40, static_cast<int32_t>(id % 3));
    if (id == 5 || id == 8) {
      // Two-sequence groups, short enough to be recomputed unshared: one
      // streams, one (best_of > n) holds its scores to the end.
      r = Scoring(id, 18, 20, 2);
      r.sampling.n = id == 5 ? 2 : 1;
      r.sampling.best_of = 2;
    }
    specs.push_back(r);
  }
  SchedulerConfig roomy = TestConfig(512);
  roomy.max_num_batched_tokens = 16;
  const Record reference = RunAll(roomy, specs);
  EXPECT_EQ(reference.stats.num_preemptions_recompute + reference.stats.num_preemptions_swap, 0);

  for (PreemptionMode mode : {PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
    SCOPED_TRACE(PreemptionModeName(mode));
    // Prefill in chunks of a few tokens beside the decodes, so some
    // requests are preempted mid-prompt.
    SchedulerConfig tight = TestConfig(16);
    tight.max_num_batched_tokens = 6;
    tight.preemption_mode = mode;
    tight.num_host_blocks = mode == PreemptionMode::kSwap ? 128 : 0;
    const Record run = RunAll(tight, specs);
    const int64_t preemptions = mode == PreemptionMode::kSwap
                                    ? run.stats.num_preemptions_swap
                                    : run.stats.num_preemptions_recompute;
    EXPECT_GE(preemptions, 3);
    EXPECT_GE(run.partly_scored_preemptions, 1);
    for (const RequestSpec& spec : specs) {
      if (spec.sampling.prompt_logprobs.has_value()) {
        ExpectCompleteScores(run, spec);
      } else {
        ExpectNoScores(run, spec.id);
      }
      for (const auto& [index, seq] : reference.out.at(spec.id).sequences) {
        EXPECT_EQ(run.out.at(spec.id).tokens(index), seq.token_ids) << spec.id;
      }
    }
    ExpectSameScoresAcrossRuns(run, reference, specs);
    if (mode == PreemptionMode::kRecompute) {
      // Recompute repeats positions; the repeats must not be reported twice
      // (ExpectCompleteScores) and did happen.
      int32_t repeats = 0;
      for (const auto& [id, counts] : run.times_scored) {
        for (const auto& [index, times] : counts) repeats += times > 1;
      }
      EXPECT_GT(repeats, 0);
    }
  }
}

// A scoring request must compute every prompt position, so it takes no
// prefix-cache hits; it still leaves its blocks in the cache for others, and
// requests that do not score still hit.
TEST(SchedulerPromptLogprobsTest, ScoringBypassesThePrefixCacheButStillFillsIt) {
  const SchedulerConfig c = TestConfig(64);
  const RequestSpec plain = MakeRequest(1, 40, 4, /*base=*/9);
  RequestSpec scored = plain;
  scored.id = 2;
  scored.sampling.prompt_logprobs = 2;
  RequestSpec again = plain;
  again.id = 3;
  const Record fresh = RunAll(c, {scored});  // the scores with an empty cache

  {
    SCOPED_TRACE("plain, scoring, plain");
    Driver d(c);
    for (const RequestSpec& spec : {plain, scored, again}) {
      FOLIO_ASSERT_OK(d.Add(spec));
      FOLIO_ASSERT_OK(d.Drain(100));
    }
    const Record& run = d.run();
    EXPECT_EQ(run.out.at(1).num_cached_prompt_tokens, 0);
    EXPECT_EQ(run.out.at(2).num_cached_prompt_tokens, 0);
    ExpectCompleteScores(run, scored);
    ExpectEachScoredOnce(run, scored.id);
    EXPECT_TRUE(SameScores(run.delivered.at(2).scores, fresh.delivered.at(2).scores));
    EXPECT_GT(run.out.at(3).num_cached_prompt_tokens, 0);
    ExpectNoScores(run, 3);
    ExpectDrained(d.scheduler());
  }
  {
    SCOPED_TRACE("scoring, then plain");
    Driver d(c);
    RequestSpec after = plain;
    after.id = 4;
    for (const RequestSpec& spec : {scored, after}) {
      FOLIO_ASSERT_OK(d.Add(spec));
      FOLIO_ASSERT_OK(d.Drain(100));
    }
    ExpectCompleteScores(d.run(), scored);
    EXPECT_GT(d.run().out.at(4).num_cached_prompt_tokens, 0)
        << "the scoring request's blocks did not reach the prefix cache";
    ExpectDrained(d.scheduler());
  }
}

// A scoring request cannot use the prompt blocks a running request holds
// for the same prompt, so admission must find room for all of them; counting
// them as hits would admit it into a pool that cannot hold it, and it would
// be preempted at once.
TEST(SchedulerPromptLogprobsTest, AdmissionDoesNotCountCachedBlocksItWillNotUse) {
  const SchedulerConfig c = TestConfig(9);  // block size 8
  const RequestSpec holder = MakeRequest(1, 40, 20, /*base=*/3);
  RequestSpec scored = holder;
  scored.id = 2;
  scored.sampling.prompt_logprobs = 1;
  Driver d(c);
  FOLIO_ASSERT_OK(d.Add(holder));
  FOLIO_ASSERT_OK(d.Step());  // the holder's prompt is in the cache, in use
  FOLIO_ASSERT_OK(d.Add(scored));
  while (d.scheduler().FindRequest(holder.id) != nullptr) {
    ASSERT_LT(d.scheduler().stats().num_steps, 100);
    FOLIO_ASSERT_OK(d.Step());
    const Request* r = d.scheduler().FindRequest(scored.id);
    ASSERT_NE(r, nullptr);
    // 6 blocks for its 40 tokens and the first sampled one; the holder
    // keeps at least 5 of the 9.
    if (d.scheduler().FindRequest(holder.id) != nullptr) {
      EXPECT_EQ(r->status, RequestStatus::kWaiting) << "step " << d.scheduler().stats().num_steps;
    }
  }
  FOLIO_ASSERT_OK(d.Drain(100));
  EXPECT_EQ(d.run().stats.num_preemptions_recompute + d.run().stats.num_preemptions_swap, 0);
  EXPECT_EQ(d.run().out.at(scored.id).num_cached_prompt_tokens, 0);
  ExpectCompleteScores(d.run(), scored);
  ExpectDrained(d.scheduler());
}

// best_of > n and beam search report their sequences once, ranked, at the
// end: the prompt scores come with that output, equal to a streaming
// request's scores of the same prompt.
TEST(SchedulerPromptLogprobsTest, RankedRequestsReportScoresOnceWithTheirResult) {
  for (int32_t budget : {512, 8}) {
    SCOPED_TRACE(testing::Message() << "budget " << budget);
    SchedulerConfig c = TestConfig(256);
    c.max_num_batched_tokens = budget;
    RequestSpec streamed = Scoring(1, 30, 10, 2, /*base=*/4);
    RequestSpec best_of = Scoring(2, 30, 10, 2, /*base=*/4);
    best_of.sampling.best_of = 3;
    RequestSpec beam = Scoring(3, 30, 10, 2, /*base=*/4);
    beam.sampling.beam_width = 3;
    beam.sampling.n = 2;
    beam.sampling.best_of = 2;
    const Record run = RunAll(c, {streamed, best_of, beam});
    for (const RequestSpec& spec : {streamed, best_of, beam}) ExpectCompleteScores(run, spec);
    for (RequestId id : {2, 3}) {
      SCOPED_TRACE(testing::Message() << "request " << id);
      const Delivery& d = run.delivered.at(id);
      EXPECT_EQ(d.num_outputs, 1);
      EXPECT_EQ(d.delivered_on, 0);
      EXPECT_TRUE(d.delivered_on_final);
      EXPECT_EQ(d.first_with_tokens, 0);  // the output with the ranked sequences
      EXPECT_TRUE(SameScores(d.scores, run.delivered.at(1).scores));
    }
    EXPECT_EQ(run.out.at(2).sequences.size(), 1u);
    EXPECT_EQ(run.out.at(3).sequences.size(), 2u);
  }
}

// A one-token prompt has nothing to score: it reports an empty list (once,
// on its first output) and schedules no scoring. prompt_logprobs = 0 scores
// every token without alternatives, with the same log-probs as N > 0. A
// request finishing in its prompt's step reports its scores there.
TEST(SchedulerPromptLogprobsTest, OneTokenPromptAndZeroAlternatives) {
  const SchedulerConfig c = TestConfig(64);
  RequestSpec one = Scoring(1, 1, 3, 3);
  RequestSpec one_beam = Scoring(2, 1, 3, 3);
  one_beam.sampling.beam_width = 2;
  one_beam.sampling.n = 2;
  one_beam.sampling.best_of = 2;
  RequestSpec two = Scoring(3, 2, 3, 3);
  RequestSpec zero = Scoring(4, 20, 3, 0, /*base=*/6);
  RequestSpec four = Scoring(5, 20, 3, 4, /*base=*/6);
  // One output token: the step that scores the last chunk also finishes.
  RequestSpec single = Scoring(6, 20, 1, 2);
  RequestSpec single_beam = Scoring(7, 20, 1, 2);
  single_beam.sampling.beam_width = 2;
  single_beam.sampling.n = 2;
  single_beam.sampling.best_of = 2;
  const std::vector<RequestSpec> specs = {one, one_beam, two, zero, four, single, single_beam};
  const Record run = RunAll(c, specs);
  for (const RequestSpec& spec : specs) ExpectCompleteScores(run, spec);
  for (RequestId id : {6, 7}) {
    EXPECT_EQ(run.delivered.at(id).num_outputs, 1) << id;
    EXPECT_TRUE(run.delivered.at(id).delivered_on_final) << id;
  }
  for (RequestId id : {1, 2}) {
    const Delivery& d = run.delivered.at(id);
    EXPECT_EQ(d.num_deliveries, 1) << id;
    EXPECT_TRUE(d.scores.empty()) << id;
    EXPECT_EQ(d.delivered_on, d.first_with_tokens) << id;
    EXPECT_FALSE(run.scoring_chunks.contains(id)) << id << " scheduled scoring";
  }
  EXPECT_TRUE(run.delivered.at(2).delivered_on_final);
  const std::vector<SampledToken>& bare = run.delivered.at(4).scores;
  const std::vector<SampledToken>& with_top = run.delivered.at(5).scores;
  ASSERT_EQ(bare.size(), with_top.size());
  for (size_t i = 0; i < bare.size(); ++i) {
    EXPECT_TRUE(bare[i].top_logprobs.empty()) << i;
    EXPECT_EQ(bare[i].token_id, with_top[i].token_id) << i;
    EXPECT_EQ(bare[i].logprob, with_top[i].logprob) << i;
  }
}

// Steps `d` until request `id` has some but not all of its prompt scored.
void StepUntilPartlyScored(Driver& d, RequestId id) {
  for (int32_t step = 0; step < 50; ++step) {
    const Request* r = d.scheduler().FindRequest(id);
    ASSERT_NE(r, nullptr);
    if (!r->prompt_logprobs.empty()) {
      ASSERT_LT(r->prompt_logprobs.size() + 1, r->spec.prompt.size()) << "scored in one step";
      return;
    }
    FOLIO_ASSERT_OK(d.Step());
  }
  FAIL() << "request " << id << " never scored";
}

// Aborted while its prompt is partly computed, a request ends without
// prompt scores (they are incomplete), gives its blocks back, and its
// neighbour is scored as if alone. Aborted while still waiting, the same.
TEST(SchedulerPromptLogprobsTest, AbortMidPromptReportsNoScores) {
  SchedulerConfig c = TestConfig(64);
  c.max_num_batched_tokens = 8;
  const RequestSpec neighbour = Scoring(2, 30, 5, 2);
  const RequestSpec victim = Scoring(1, 40, 5, 2);
  const RequestSpec never_run = Scoring(3, 12, 5, 2);
  Driver d(c);
  for (const RequestSpec& spec : {neighbour, victim, never_run}) FOLIO_ASSERT_OK(d.Add(spec));
  StepUntilPartlyScored(d, victim.id);
  ASSERT_NE(d.scheduler().FindRequest(never_run.id), nullptr);
  ASSERT_EQ(d.scheduler().FindRequest(never_run.id)->status, RequestStatus::kWaiting);
  EXPECT_TRUE(d.scheduler().Abort(victim.id));
  EXPECT_TRUE(d.scheduler().Abort(never_run.id));
  FOLIO_ASSERT_OK(d.Drain(200));
  const Record& run = d.run();
  for (RequestId id : {victim.id, never_run.id}) {
    SCOPED_TRACE(testing::Message() << "request " << id);
    EXPECT_TRUE(run.out.at(id).finished);
    EXPECT_EQ(run.out.at(id).reason(), FinishReason::kAbort);
    ASSERT_TRUE(run.delivered.contains(id));
    EXPECT_EQ(run.delivered.at(id).num_deliveries, 0);
  }
  ExpectCompleteScores(run, neighbour);
  const Record alone = RunAll(c, {neighbour});
  EXPECT_TRUE(SameScores(run.delivered.at(2).scores, alone.delivered.at(2).scores));
  ExpectDrained(d.scheduler());
}

// Aborted after its whole prompt was scored but before a token was sampled
// (chunked prefill stops one token short), the request reports the scores
// on its final output: it is the first and only one.
TEST(SchedulerPromptLogprobsTest, AbortAfterScoringReportsTheScoresOnTheFinalOutput) {
  SchedulerConfig c = TestConfig(64);
  c.max_num_batched_tokens = 8;
  const RequestSpec spec = Scoring(1, 17, 5, 2);  // chunks of 8, 8, then the sampling step
  Driver d(c);
  FOLIO_ASSERT_OK(d.Add(spec));
  for (int32_t step = 0; step < 20; ++step) {
    const Request* r = d.scheduler().FindRequest(spec.id);
    ASSERT_NE(r, nullptr);
    ASSERT_TRUE(r->seqs.front()->output_tokens().empty()) << "sampled before scoring finished";
    if (r->prompt_logprobs.size() + 1 == spec.prompt.size()) break;
    FOLIO_ASSERT_OK(d.Step());
  }
  ASSERT_FALSE(d.run().delivered.contains(spec.id));
  EXPECT_TRUE(d.scheduler().Abort(spec.id));
  FOLIO_ASSERT_OK(d.Drain(10));
  const Delivery& got = d.run().delivered.at(spec.id);
  EXPECT_EQ(got.num_outputs, 1);
  EXPECT_TRUE(got.delivered_on_final);
  ExpectCompleteScores(d.run(), spec);
  const Record alone = RunAll(TestConfig(64), {spec});
  EXPECT_TRUE(SameScores(got.scores, alone.delivered.at(spec.id).scores));
  ExpectDrained(d.scheduler());
}

// The worker's first prompt-scoring entry of the step, or null.
PromptLogprobs* FirstScoring(StepResult& result) {
  return result.prompt_logprobs.empty() ? nullptr : &result.prompt_logprobs.front();
}

// A plan entry that does not score, or null.
const ScheduledSequence* NonScoring(const StepPlan& plan) {
  for (const ScheduledSequence& w : plan.scheduled) {
    if (!w.prompt_logprobs) return &w;
  }
  return nullptr;
}

// Steps a fresh scheduler (a short plain request first, so steps mix
// scoring and non-scoring work, then a chunked scoring one) until `tamper`
// edits a worker answer at or after step `from`; returns that step's status.
absl::Status StatusOfTamperedStep(int32_t from, const Tamper& tamper) {
  SchedulerConfig c = TestConfig(64);
  c.max_num_batched_tokens = 12;
  Driver d(c);
  if (absl::Status st = d.Add(MakeRequest(1, 4, 20)); !st.ok()) return st;
  if (absl::Status st = d.Add(Scoring(2, 30, 8, 3)); !st.ok()) return st;
  for (int32_t step = 0; step < 100 && d.scheduler().HasUnfinishedRequests(); ++step) {
    const absl::Status st = d.Step(step >= from ? tamper : nullptr);
    if (d.tampered()) return st;
    if (!st.ok()) return absl::UnknownError(absl::StrCat("untampered step ", step, ": ", st.ToString()));
  }
  return absl::NotFoundError("never tampered");
}

// A worker that answers prompt scoring wrongly (missing, short, long,
// misplaced, for the wrong sequence or unasked) makes Update fail with
// INTERNAL instead of reporting wrong scores, at the first scoring chunk and
// at the chunk that also samples.
TEST(SchedulerPromptLogprobsTest, BrokenWorkerAnswersAreInternalErrors) {
  struct Case {
    const char* name;
    Tamper tamper;
  };
  const std::vector<Case> cases = {
      {"missing entry",
       [](const StepPlan&, StepResult& r) {
         if (r.prompt_logprobs.empty()) return false;
         r.prompt_logprobs.clear();
         return true;
       }},
      {"one token short",
       [](const StepPlan&, StepResult& r) {
         PromptLogprobs* p = FirstScoring(r);
         if (p == nullptr) return false;
         p->tokens.pop_back();
         return true;
       }},
      {"one token too many",
       [](const StepPlan&, StepResult& r) {
         PromptLogprobs* p = FirstScoring(r);
         if (p == nullptr) return false;
         p->tokens.push_back(p->tokens.back());
         return true;
       }},
      {"first index one too high",
       [](const StepPlan&, StepResult& r) {
         PromptLogprobs* p = FirstScoring(r);
         if (p == nullptr) return false;
         ++p->first_index;
         return true;
       }},
      {"first index one too low",
       [](const StepPlan&, StepResult& r) {
         PromptLogprobs* p = FirstScoring(r);
         if (p == nullptr) return false;
         --p->first_index;
         return true;
       }},
      {"another sequence's id",
       [](const StepPlan& plan, StepResult& r) {
         PromptLogprobs* p = FirstScoring(r);
         const ScheduledSequence* other = NonScoring(plan);
         if (p == nullptr || other == nullptr) return false;
         p->seq_id = other->seq_id;
         return true;
       }},
      {"an entry for a sequence that does not score",
       [](const StepPlan& plan, StepResult& r) {
         const ScheduledSequence* other = NonScoring(plan);
         if (other == nullptr || r.prompt_logprobs.empty()) return false;
         PromptLogprobs extra = r.prompt_logprobs.front();
         extra.seq_id = other->seq_id;
         extra.first_index = other->start_position + 1;
         r.prompt_logprobs.push_back(extra);
         return true;
       }},
      {"an entry in a step that scores nothing",
       [](const StepPlan& plan, StepResult& r) {
         if (!r.prompt_logprobs.empty() || plan.scheduled.empty()) return false;
         const ScheduledSequence& w = plan.scheduled.front();
         r.prompt_logprobs.push_back({w.seq_id, w.start_position + 1, {SampledToken{}}});
         return true;
       }},
  };
  // Step 0 scores the first chunk; from step 2 on, the chunk that samples
  // (30 tokens at 11 a step beside a decode) or, for the last case, decodes.
  for (int32_t from : {0, 2}) {
    for (const Case& k : cases) {
      SCOPED_TRACE(testing::Message() << k.name << ", from step " << from);
      const absl::Status st = StatusOfTamperedStep(from, k.tamper);
      EXPECT_EQ(st.code(), absl::StatusCode::kInternal) << st;
    }
  }
  // The same run untampered is fine (the errors above are the tampering's).
  const absl::Status clean = StatusOfTamperedStep(0, [](const StepPlan&, StepResult&) {
    return false;
  });
  EXPECT_EQ(clean.code(), absl::StatusCode::kNotFound) << clean;
}

// A worker that scores a different token than the prompt's (say, an
// off-by-one in its gather) is as broken as one that scores too few: the
// scheduler knows the prompt and must not report another token's score.
TEST(SchedulerPromptLogprobsTest, WorkerScoringTheWrongTokenIsAnInternalError) {
  const absl::Status st = StatusOfTamperedStep(0, [](const StepPlan&, StepResult& r) {
    PromptLogprobs* p = FirstScoring(r);
    if (p == nullptr) return false;
    p->tokens.back().token_id += 1;
    return true;
  });
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal) << st;
}

}  // namespace
}  // namespace folio
