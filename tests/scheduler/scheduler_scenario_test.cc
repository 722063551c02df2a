// Scenario tests: the bugs other engines shipped (issue 2, section 4 and
// REFERENCES.md). Every workload runs through the real Scheduler and a
// SimulatedWorker that verifies the KV mapping each step, with bounded step
// loops (a hang is a failure, never a stuck test), and ends drained.

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "scheduler/simulated_worker.h"
#include "tests/scheduler/scheduler_test_util.h"

namespace folio {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using test::ExpectDrained;
using test::MakeRequest;
using test::OutputCollector;
using test::TestConfig;

// A mixed workload: single sequences of varied lengths, some sharing a
// prompt prefix, and (optionally) parallel-sampling requests.
std::vector<RequestSpec> MixedWorkload(bool with_parallel) {
  std::vector<RequestSpec> specs;
  const int32_t prompt_lens[] = {5, 40, 17, 8, 33, 24, 3, 50, 16, 29};
  const int32_t max_tokens[] = {30, 12, 41, 25, 9, 36, 44, 20, 31, 15};
  for (int32_t i = 0; i < 10; ++i) {
    // Requests 4 and 8 share request 1's prompt prefix (base 2).
    const int32_t base = (i == 4 || i == 8) ? 2 : i + 1;
    RequestSpec r = MakeRequest(i, prompt_lens[i], max_tokens[i], base);
    if (with_parallel && (i == 2 || i == 5)) {
      r.sampling.n = 2;
      r.sampling.best_of = 2;
    }
    specs.push_back(std::move(r));
  }
  return specs;
}

struct RunOutcome {
  OutputCollector out;
  SchedulerStats stats;
  int32_t swap_out_ops = 0;
  int32_t swap_in_ops = 0;
  int64_t first_swap_out_step = -1;
  int64_t first_swap_in_step = -1;
};

RunOutcome RunWorkload(const SchedulerConfig& c, const std::vector<RequestSpec>& specs) {
  RunOutcome o;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  for (const RequestSpec& r : specs) EXPECT_TRUE(s->AddRequest(r).ok());
  const absl::Status st =
      test::RunUntilDrained(*s, w, o.out, 20000, [&](const StepPlan& p, const Scheduler&) {
        if (!p.swap_out.empty() && o.first_swap_out_step < 0) o.first_swap_out_step = p.step_id;
        if (!p.swap_in.empty() && o.first_swap_in_step < 0) o.first_swap_in_step = p.step_id;
        o.swap_out_ops += static_cast<int32_t>(p.swap_out.size());
        o.swap_in_ops += static_cast<int32_t>(p.swap_in.size());
      });
  EXPECT_TRUE(st.ok()) << st;
  o.stats = s->stats();
  ExpectDrained(*s);
  return o;
}

void ExpectSameOutputs(const OutputCollector& got, const OutputCollector& want) {
  ASSERT_EQ(got.all().size(), want.all().size());
  for (const auto& [id, w] : want.all()) {
    const test::CollectedRequest& g = got.at(id);
    EXPECT_TRUE(g.finished) << id;
    EXPECT_EQ(g.error, w.error) << id;
    ASSERT_EQ(g.sequences.size(), w.sequences.size()) << id;
    for (const auto& [index, ws] : w.sequences) {
      EXPECT_EQ(g.tokens(index), ws.token_ids) << "request " << id << " sequence " << index;
      EXPECT_EQ(g.reason(index), ws.finish_reason) << "request " << id;
    }
  }
}

// The vLLM e2e check: a block-starved engine, preempting constantly, must
// produce exactly the tokens an ample one does (any wrong KV mapping after
// recompute, swap or copy-on-write would change them).
class StarvedMatchesAmpleTest : public ::testing::TestWithParam<std::tuple<PreemptionMode, bool>> {};

TEST_P(StarvedMatchesAmpleTest, IdenticalTokens) {
  const auto [mode, caching] = GetParam();
  const std::vector<RequestSpec> specs = MixedWorkload(/*with_parallel=*/true);
  SchedulerConfig ample = TestConfig(400);
  ample.enable_prefix_caching = caching;
  const RunOutcome reference = RunWorkload(ample, specs);
  EXPECT_EQ(reference.stats.num_preemptions_recompute + reference.stats.num_preemptions_swap, 0);

  SchedulerConfig starved = TestConfig(16);
  starved.enable_prefix_caching = caching;
  starved.preemption_mode = mode;
  starved.num_host_blocks = 64;
  starved.max_num_batched_tokens = 48;
  const RunOutcome got = RunWorkload(starved, specs);
  ExpectSameOutputs(got.out, reference.out);
  const int64_t preemptions = got.stats.num_preemptions_recompute + got.stats.num_preemptions_swap;
  EXPECT_GT(preemptions, 3);
  switch (mode) {
    case PreemptionMode::kRecompute:
      EXPECT_EQ(got.stats.num_preemptions_swap, 0);
      EXPECT_EQ(got.swap_out_ops, 0);
      break;
    case PreemptionMode::kSwap:
      EXPECT_GT(got.stats.num_preemptions_swap, 0);
      // Swap-outs come first, swap-ins bring the same blocks back.
      EXPECT_GT(got.swap_out_ops, 0);
      EXPECT_EQ(got.swap_in_ops, got.swap_out_ops);
      EXPECT_LT(got.first_swap_out_step, got.first_swap_in_step);
      break;
    case PreemptionMode::kAuto:
      break;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, StarvedMatchesAmpleTest,
                         ::testing::Combine(::testing::Values(PreemptionMode::kRecompute,
                                                             PreemptionMode::kSwap,
                                                             PreemptionMode::kAuto),
                                            ::testing::Bool()));

// The same with a 1,024-token greedy-like generation per request, as vLLM's
// block-manager e2e test does: long outputs accumulate any mapping error.
TEST(SchedulerScenarioTest, LongGenerationsStarvedMatchAmple) {
  std::vector<RequestSpec> specs;
  for (int32_t i = 0; i < 4; ++i) specs.push_back(MakeRequest(i, 10 + 7 * i, 1024 - 30 * i));
  SchedulerConfig ample = TestConfig(600);
  ample.max_model_len = 2048;
  const RunOutcome reference = RunWorkload(ample, specs);
  SchedulerConfig starved = TestConfig(200);
  starved.max_model_len = 2048;
  starved.preemption_mode = PreemptionMode::kRecompute;
  const RunOutcome got = RunWorkload(starved, specs);
  ExpectSameOutputs(got.out, reference.out);
  EXPECT_GT(got.stats.num_preemptions_recompute, 0);
  for (int32_t i = 0; i < 4; ++i) EXPECT_EQ(got.out.at(i).tokens().size(), 1024u - 30 * i);
}

// auto = recompute for single-sequence requests, swap for multi-sequence ones.
TEST(SchedulerScenarioTest, AutoRecomputesSingleAndSwapsMultiSequence) {
  SchedulerConfig c = TestConfig(16);
  c.num_host_blocks = 64;
  const RunOutcome single = RunWorkload(c, MixedWorkload(/*with_parallel=*/false));
  EXPECT_GT(single.stats.num_preemptions_recompute, 0);
  EXPECT_EQ(single.stats.num_preemptions_swap, 0);

  // Two fanned-out n=2 requests outgrow the pool while decoding.
  std::vector<RequestSpec> specs;
  for (RequestId id = 0; id < 2; ++id) {
    RequestSpec r = MakeRequest(id, 12, 40);
    r.sampling.n = 2;
    r.sampling.best_of = 2;
    specs.push_back(r);
  }
  const RunOutcome multi = RunWorkload(c, specs);
  EXPECT_GT(multi.stats.num_preemptions_swap, 0);
  EXPECT_EQ(multi.stats.num_preemptions_recompute, 0);
  SchedulerConfig ample = TestConfig(400);
  ExpectSameOutputs(multi.out, RunWorkload(ample, specs).out);
}

// Swap mode with a full host pool falls back to recompute; the engine keeps
// going and the outputs are unaffected.
TEST(SchedulerScenarioTest, HostPoolFullFallsBackToRecompute) {
  const std::vector<RequestSpec> specs = MixedWorkload(/*with_parallel=*/true);
  SchedulerConfig c = TestConfig(16);
  c.preemption_mode = PreemptionMode::kSwap;
  c.num_host_blocks = 0;
  const RunOutcome none = RunWorkload(c, specs);
  EXPECT_GT(none.stats.num_preemptions_recompute, 0);
  EXPECT_EQ(none.stats.num_preemptions_swap, 0);
  EXPECT_EQ(none.swap_out_ops, 0);
  // A host pool too small for most victims: some swaps, the rest recompute.
  c.num_host_blocks = 3;
  const RunOutcome tiny = RunWorkload(c, specs);
  EXPECT_GT(tiny.stats.num_preemptions_recompute, 0);
  const RunOutcome reference = RunWorkload(TestConfig(400), specs);
  ExpectSameOutputs(none.out, reference.out);
  ExpectSameOutputs(tiny.out, reference.out);
}

// Victim choice: the lowest-priority, latest-arrived running request.
struct VictimCase {
  SchedulingPolicy policy;
  int32_t priorities[3];
  RequestId victim;
};

class VictimTest : public ::testing::TestWithParam<VictimCase> {};

TEST_P(VictimTest, PicksLowestPriorityLatestArrival) {
  const VictimCase& k = GetParam();
  SchedulerConfig c = TestConfig(6);  // three prompts of 15 fill it exactly
  c.policy = k.policy;
  c.preemption_mode = PreemptionMode::kRecompute;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  absl::flat_hash_map<SequenceId, RequestId> owner;
  for (RequestId id = 0; id < 3; ++id) {
    RequestSpec r = MakeRequest(id, 15, 8);
    r.priority = k.priorities[id];
    FOLIO_ASSERT_OK(s->AddRequest(r));
  }
  OutputCollector out;
  std::vector<RequestId> preempted;
  for (int32_t step = 0; step < 3; ++step) {
    StepPlan plan;
    FOLIO_ASSERT_OK(test::Step(*s, w, out, &plan));
    for (const NewSequenceData& n : plan.new_sequences) owner[n.seq_id] = n.request_id;
    for (SequenceId id : plan.preempted_seq_ids) preempted.push_back(owner[id]);
  }
  // Step 3 writes position 16: each request needs a third block, none is free.
  EXPECT_THAT(preempted, ElementsAre(k.victim));
  EXPECT_EQ(s->num_waiting(), 1);
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 200));
  for (RequestId id = 0; id < 3; ++id) EXPECT_EQ(out.at(id).tokens().size(), 8u);
  ExpectDrained(*s);
}

INSTANTIATE_TEST_SUITE_P(
    Policies, VictimTest,
    ::testing::Values(VictimCase{SchedulingPolicy::kFcfs, {0, 0, 0}, 2},
                      VictimCase{SchedulingPolicy::kFcfs, {9, 0, 0}, 2},  // FCFS ignores priority
                      VictimCase{SchedulingPolicy::kPriority, {2, 0, 1}, 0},
                      VictimCase{SchedulingPolicy::kPriority, {1, 1, 0}, 1},
                      VictimCase{SchedulingPolicy::kPriority, {0, 1, 0}, 1}));

// vLLM tests/core/test_scheduler.py: preempt one request, then abort the
// other; the preempted one resumes and completes, nothing leaks.
TEST(SchedulerScenarioTest, PreemptThenAbortTheOther) {
  for (PreemptionMode mode : {PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
    SchedulerConfig c = TestConfig(4);
    c.preemption_mode = mode;
    c.num_host_blocks = 8;
    auto s = test::MakeScheduler(c);
    SimulatedWorker w(test::WorkerOptions(c));
    FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, 15, 20)));
    FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(2, 15, 12)));
    OutputCollector out;
    for (int32_t step = 0; step < 3; ++step) FOLIO_ASSERT_OK(test::Step(*s, w, out));
    ASSERT_EQ(s->num_waiting() + s->num_swapped(), 1) << PreemptionModeName(mode);
    ASSERT_EQ(s->num_running(), 1);
    EXPECT_EQ(s->RunningRequests()[0]->spec.id, 1);
    EXPECT_TRUE(s->Abort(1));
    FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 100));
    EXPECT_EQ(out.at(1).reason(), FinishReason::kAbort);
    EXPECT_TRUE(out.at(1).finished);
    EXPECT_EQ(out.at(2).reason(), FinishReason::kLength);
    EXPECT_EQ(out.at(2).tokens().size(), 12u);
    // Same tokens as if it had run alone.
    auto alone = test::MakeScheduler(TestConfig(64));
    SimulatedWorker w2(test::WorkerOptions(TestConfig(64)));
    FOLIO_ASSERT_OK(alone->AddRequest(MakeRequest(2, 15, 12)));
    auto ref = test::RunToCompletion(*alone, w2, 100);
    FOLIO_ASSERT_OK(ref.status());
    EXPECT_EQ(out.at(2).tokens(), ref->at(2).tokens());
    ExpectDrained(*s);
    ExpectDrained(*alone);
  }
}

// Abort wherever the request is frees everything it held.
TEST(SchedulerScenarioTest, AbortWhileWaitingRunningOrSwappedFreesEverything) {
  SchedulerConfig c = TestConfig(6);
  c.preemption_mode = PreemptionMode::kSwap;
  c.num_host_blocks = 16;
  c.max_num_seqs = 3;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  for (RequestId id = 0; id < 4; ++id) FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(id, 15, 30)));
  OutputCollector out;
  // Three run (max_num_seqs), one waits; at position 16 one is swapped out.
  for (int32_t step = 0; step < 3; ++step) FOLIO_ASSERT_OK(test::Step(*s, w, out));
  ASSERT_EQ(s->num_running(), 2);
  ASSERT_EQ(s->num_swapped(), 1);
  ASSERT_EQ(s->num_waiting(), 1);
  EXPECT_GT(s->kv_cache().host_pool().num_used_blocks(), 0);
  EXPECT_NE(s->FindRequest(2), nullptr);
  EXPECT_EQ(s->FindRequest(2)->status, RequestStatus::kSwapped);
  EXPECT_EQ(s->FindRequest(3)->status, RequestStatus::kWaiting);
  EXPECT_TRUE(s->Abort(2));  // swapped
  EXPECT_EQ(s->kv_cache().host_pool().num_used_blocks(), 0);
  EXPECT_TRUE(s->Abort(3));  // waiting
  EXPECT_TRUE(s->Abort(0));  // running
  EXPECT_EQ(s->FindRequest(0), nullptr);
  StepPlan plan;
  FOLIO_ASSERT_OK(test::Step(*s, w, out, &plan));
  EXPECT_EQ(plan.finished_seq_ids.size(), 1u);  // only request 0 was mirrored
  for (RequestId id : {0, 2, 3}) {
    EXPECT_TRUE(out.at(id).finished) << id;
    EXPECT_EQ(out.at(id).reason(), FinishReason::kAbort) << id;
  }
  EXPECT_TRUE(out.at(3).tokens().empty());
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 100));
  EXPECT_EQ(out.at(1).tokens().size(), 30u);
  ExpectDrained(*s);
  // The engine still serves afterwards.
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(9, 20, 5)));
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 100));
  EXPECT_EQ(out.at(9).tokens().size(), 5u);
  ExpectDrained(*s);
}

// vLLM test_abort: many concurrent requests, some cancelled mid-flight; the
// rest complete with exact token counts.
TEST(SchedulerScenarioTest, AbortSomeOfManyUnderPressure) {
  SchedulerConfig c = TestConfig(40);
  c.num_host_blocks = 20;
  c.max_num_batched_tokens = 64;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  for (RequestId id = 0; id < 40; ++id) {
    RequestSpec r = MakeRequest(id, 5 + (id * 7) % 30, 10 + (id * 11) % 25);
    if (id % 5 == 0) {
      r.sampling.n = 2;
      r.sampling.best_of = 2;
    }
    FOLIO_ASSERT_OK(s->AddRequest(r));
  }
  OutputCollector out;
  for (int32_t step = 0; step < 300 && s->HasUnfinishedRequests(); ++step) {
    if (step % 4 == 3) {
      for (RequestId id = step % 40; id < 40; id += 9) s->Abort(id);  // some already done
    }
    FOLIO_ASSERT_OK(test::Step(*s, w, out));
  }
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 500));
  int32_t aborted = 0;
  for (RequestId id = 0; id < 40; ++id) {
    const test::CollectedRequest& r = out.at(id);
    EXPECT_TRUE(r.finished);
    if (r.reason() == FinishReason::kAbort) {
      ++aborted;
      continue;
    }
    for (const auto& [index, seq] : r.sequences) {
      EXPECT_EQ(seq.token_ids.size(), static_cast<size_t>(10 + (id * 11) % 25)) << id;
    }
  }
  EXPECT_GT(aborted, 3);
  EXPECT_LT(aborted, 40);
  ExpectDrained(*s);
}

// A prompt that can never be served finishes at once with a clear error;
// the requests behind it still run.
TEST(SchedulerScenarioTest, NeverFitPromptFinishesWithErrorAndDoesNotBlock) {
  SchedulerConfig c = TestConfig(10);  // 80 token slots
  c.max_model_len = 100;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, 100, 5)));  // 100 + 1 > max_model_len
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(2, 99, 5)));   // fits max_model_len, not the pool
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(3, 20, 5)));
  OutputCollector out;
  StepPlan plan;
  FOLIO_ASSERT_OK(test::Step(*s, w, out, &plan));
  ASSERT_TRUE(out.contains(1));
  EXPECT_TRUE(out.at(1).finished);
  EXPECT_EQ(out.at(1).reason(), FinishReason::kError);
  EXPECT_THAT(out.at(1).error, HasSubstr("max_model_len"));
  EXPECT_TRUE(out.at(1).tokens().empty());
  ASSERT_TRUE(out.contains(2));
  EXPECT_EQ(out.at(2).reason(), FinishReason::kError);
  EXPECT_THAT(out.at(2).error, HasSubstr("blocks"));
  // Neither ever reached the workers; the one behind them runs now.
  ASSERT_EQ(plan.new_sequences.size(), 1u);
  EXPECT_EQ(plan.new_sequences[0].request_id, 3);
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 50));
  EXPECT_EQ(out.at(3).tokens().size(), 5u);
  ExpectDrained(*s);
}

// ok vs later vs never: "later" waits and then runs when blocks free up;
// "never" finishes at once; nothing hangs.
TEST(SchedulerScenarioTest, OkLaterNever) {
  SchedulerConfig c = TestConfig(10);  // 80 token slots
  c.max_model_len = 300;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, 300, 4)));  // never: max_model_len
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(2, 50, 10)));  // ok: 7 blocks
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(3, 90, 4)));   // never: 12 blocks
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(4, 40, 6)));   // later: 6 blocks, 3 free
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(5, 4, 3)));    // behind it (FCFS)
  OutputCollector out;
  FOLIO_ASSERT_OK(test::Step(*s, w, out));
  EXPECT_EQ(out.at(1).reason(), FinishReason::kError);
  EXPECT_EQ(out.at(3).reason(), FinishReason::kError);
  EXPECT_EQ(s->num_running(), 1);
  EXPECT_EQ(s->num_waiting(), 2);
  EXPECT_EQ(s->FindRequest(4)->status, RequestStatus::kWaiting);
  std::vector<RequestId> admitted;
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 100, [&](const StepPlan& p, const Scheduler&) {
    for (const NewSequenceData& n : p.new_sequences) admitted.push_back(n.request_id);
  }));
  EXPECT_THAT(admitted, ElementsAre(4, 5));
  EXPECT_EQ(out.at(2).tokens().size(), 10u);
  EXPECT_EQ(out.at(4).tokens().size(), 6u);
  EXPECT_EQ(out.at(5).tokens().size(), 3u);
  EXPECT_EQ(s->stats().num_preemptions_recompute, 0);
  ExpectDrained(*s);
}

// The watermark is kept free even in an empty pool (as vLLM does), so a
// prompt that needs every block can never be admitted: it must finish at
// once with a clear error, not wait forever, and not block the queue.
TEST(SchedulerScenarioTest, PromptNeedingTheWatermarkNeverFitsAndDoesNotHang) {
  SchedulerConfig c = TestConfig(100);
  c.watermark = 0.01;  // one block
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, 799, 50)));  // 800 tokens = 100 blocks
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(2, 791, 5)));   // 99 blocks: fits
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(3, 10, 5)));
  OutputCollector out;
  FOLIO_ASSERT_OK(test::Step(*s, w, out));
  ASSERT_TRUE(out.contains(1));
  EXPECT_EQ(out.at(1).reason(), FinishReason::kError);
  EXPECT_THAT(out.at(1).error, HasSubstr("watermark"));
  EXPECT_TRUE(out.at(1).tokens().empty());
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 200));
  EXPECT_EQ(out.at(2).tokens().size(), 5u);
  EXPECT_TRUE(out.at(2).error.empty());
  EXPECT_EQ(out.at(3).tokens().size(), 5u);
  ExpectDrained(*s);
}

// vLLM test_preemption: too few blocks for even one sequence to reach its
// max_tokens finishes it with "length" and never hangs.
TEST(SchedulerScenarioTest, AloneAndOutOfBlocksFinishesWithLength) {
  for (PreemptionMode mode : {PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
    SchedulerConfig c = TestConfig(4);  // 32 token slots
    c.preemption_mode = mode;
    c.num_host_blocks = 8;
    auto s = test::MakeScheduler(c);
    SimulatedWorker w(test::WorkerOptions(c));
    FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, 20, 100)));
    auto out = test::RunToCompletion(*s, w, 200);
    FOLIO_ASSERT_OK(out.status());
    EXPECT_EQ(out->at(1).reason(), FinishReason::kLength);
    // Positions 0..31 hold 20 prompt + 12 computed outputs, plus the one sampled last.
    EXPECT_EQ(out->at(1).tokens().size(), 13u);
    EXPECT_THAT(out->at(1).error, HasSubstr("KV cache"));
    ExpectDrained(*s);
  }
}

// Two requests that outgrow a tiny pool together: one is preempted, the
// other then grows alone until it cannot, and both end without a hang.
TEST(SchedulerScenarioTest, TwoRequestsOutgrowingThePoolBothEnd) {
  for (PreemptionMode mode : {PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
    SchedulerConfig c = TestConfig(4);
    c.preemption_mode = mode;
    c.num_host_blocks = 8;
    auto s = test::MakeScheduler(c);
    SimulatedWorker w(test::WorkerOptions(c));
    FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, 10, 100)));
    FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(2, 10, 100)));
    auto out = test::RunToCompletion(*s, w, 500);
    FOLIO_ASSERT_OK(out.status());
    for (RequestId id : {1, 2}) {
      EXPECT_EQ(out->at(id).reason(), FinishReason::kLength) << id;
      EXPECT_EQ(out->at(id).tokens().size(), 23u) << id;  // 32 slots - 10 + 1
    }
    ExpectDrained(*s);
  }
}

// A swapped-out group that needs its blocks plus growth room may never get
// that headroom back; once nothing else runs it must still resume (and end
// by length if it cannot grow), not sit in the swapped queue forever.
TEST(SchedulerScenarioTest, SwappedGroupThatCannotRegainHeadroomDoesNotHang) {
  SchedulerConfig c = TestConfig(10);
  c.preemption_mode = PreemptionMode::kSwap;
  c.num_host_blocks = 20;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, 4, 10)));
  RequestSpec big = MakeRequest(2, 58, 50);
  big.sampling.n = 2;
  big.sampling.best_of = 2;
  FOLIO_ASSERT_OK(s->AddRequest(big));
  OutputCollector out;
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 300));
  EXPECT_EQ(s->stats().num_preemptions_swap, 1);
  EXPECT_EQ(out.at(1).tokens().size(), 10u);
  ASSERT_EQ(out.at(2).sequences.size(), 2u);
  for (int32_t i = 0; i < 2; ++i) {
    EXPECT_EQ(out.at(2).reason(i), FinishReason::kLength);
    EXPECT_GT(out.at(2).tokens(i).size(), 4u);
  }
  ExpectDrained(*s);
}

// Recompute mode splits a preempted group's shared blocks: an n=2 request
// may then need more blocks than the pool has to come back. It must end (by
// length, keeping its tokens) once nothing else runs, not wait forever.
TEST(SchedulerScenarioTest, RecomputedGroupTooBigToReadmitEndsByLength) {
  SchedulerConfig c = TestConfig(6);  // 48 token slots
  c.preemption_mode = PreemptionMode::kRecompute;
  c.enable_prefix_caching = false;
  c.policy = SchedulingPolicy::kPriority;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  RequestSpec group = MakeRequest(1, 8, 40);
  group.sampling.n = 2;
  group.sampling.best_of = 2;
  group.priority = 1;
  FOLIO_ASSERT_OK(s->AddRequest(group));
  OutputCollector out;
  // Alone, the group holds 5 blocks by position 23 (one shared, two each).
  for (int32_t step = 0; step < 13; ++step) FOLIO_ASSERT_OK(test::Step(*s, w, out));
  EXPECT_EQ(s->kv_cache().device_pool().num_used_blocks(), 5);
  // A more important one-block request takes the last block; at position 24
  // the group needs two and is preempted.
  RequestSpec small = MakeRequest(2, 1, 7);
  small.priority = 0;
  FOLIO_ASSERT_OK(s->AddRequest(small));
  for (int32_t step = 0; step < 5 && s->stats().num_preemptions_recompute == 0; ++step) {
    FOLIO_ASSERT_OK(test::Step(*s, w, out));
  }
  ASSERT_EQ(s->stats().num_preemptions_recompute, 1);
  ASSERT_EQ(s->FindRequest(1)->status, RequestStatus::kWaiting);
  // Recomputed separately its two sequences need 2 x 4 = 8 blocks.
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 100));
  EXPECT_EQ(out.at(2).tokens().size(), 7u);
  const test::CollectedRequest& g = out.at(1);
  EXPECT_THAT(g.error, HasSubstr("blocks"));
  ASSERT_EQ(g.sequences.size(), 2u);
  for (int32_t i = 0; i < 2; ++i) {
    EXPECT_EQ(g.reason(i), FinishReason::kLength);
    EXPECT_EQ(g.tokens(i).size(), 17u);  // positions 8..24
  }
  ExpectDrained(*s);
}

// A request whose fan-out can never fit max_num_seqs (or whose sequences
// cannot all decode within one step's budget) would wait forever: it is
// rejected up front.
TEST(SchedulerScenarioTest, FanOutBeyondMaxNumSeqsOrBudgetIsRejected) {
  SchedulerConfig c = TestConfig(64);
  c.max_num_seqs = 2;
  auto s = test::MakeScheduler(c);
  RequestSpec r = MakeRequest(1, 5, 5);
  r.sampling.n = 3;
  r.sampling.best_of = 3;
  const absl::Status st = s->AddRequest(r);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("best_of"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("max_num_seqs"));

  c = TestConfig(64);
  c.max_num_batched_tokens = 3;
  s = test::MakeScheduler(c);
  r = MakeRequest(1, 5, 5);
  r.sampling.beam_width = 4;
  const absl::Status st2 = s->AddRequest(r);
  EXPECT_EQ(st2.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st2.message()), HasSubstr("beam_width"));
  // At the limit it is served.
  SimulatedWorker w(test::WorkerOptions(c));
  r.sampling.beam_width = 3;
  r.sampling.n = 3;
  r.sampling.best_of = 3;
  FOLIO_ASSERT_OK(s->AddRequest(r));
  auto out = test::RunToCompletion(*s, w, 200);
  FOLIO_ASSERT_OK(out.status());
  EXPECT_EQ(out->at(1).sequences.size(), 3u);
  ExpectDrained(*s);
}

// Chunked prefill: every step's scheduled tokens, decodes included, stay
// within max_num_batched_tokens, and long prompts complete over many steps.
TEST(SchedulerScenarioTest, ChunkedPrefillRespectsTheBudget) {
  SchedulerConfig c = TestConfig(200);
  c.max_num_batched_tokens = 32;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  // Decoding requests first, then long prompts arriving behind them.
  for (RequestId id = 0; id < 6; ++id) FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(id, 4, 40)));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(10, 150, 5)));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(11, 97, 5)));
  absl::flat_hash_map<SequenceId, RequestId> owner;
  absl::flat_hash_map<RequestId, int32_t> prefill_steps;
  absl::flat_hash_map<RequestId, int32_t> next_pos;
  int32_t full_steps = 0;
  auto out = test::RunToCompletion(*s, w, 500, [&](const StepPlan& p, const Scheduler&) {
    EXPECT_LE(p.num_scheduled_tokens, 32);
    if (p.num_scheduled_tokens == 32) ++full_steps;
    for (const NewSequenceData& n : p.new_sequences) owner[n.seq_id] = n.request_id;
    for (const ScheduledSequence& work : p.scheduled) {
      const RequestId id = owner[work.seq_id];
      EXPECT_EQ(work.start_position, next_pos[id]) << id;  // chunks are contiguous
      next_pos[id] = work.start_position + static_cast<int32_t>(work.token_ids.size());
      if (id >= 10 && work.start_position < (id == 10 ? 150 : 97)) {
        ++prefill_steps[id];
        const bool last = next_pos[id] == (id == 10 ? 150 : 97);
        EXPECT_EQ(work.sample_mode, last ? SampleMode::kSample : SampleMode::kNone);
      }
    }
  });
  FOLIO_ASSERT_OK(out.status());
  EXPECT_GE(prefill_steps[10], 5);  // 150 tokens through a 32-token budget
  EXPECT_GE(prefill_steps[11], 4);
  EXPECT_GT(full_steps, 5);  // prefill chunks fill what decodes leave
  EXPECT_EQ(out->at(10).tokens().size(), 5u);
  EXPECT_EQ(out->at(11).tokens().size(), 5u);
  for (RequestId id = 0; id < 6; ++id) EXPECT_EQ(out->at(id).tokens().size(), 40u);
  ExpectDrained(*s);
}

// A prefix-cache hit does not consume the budget: a second request with the
// same long prompt computes only the uncached tail (at least one token).
TEST(SchedulerScenarioTest, PrefixCacheHitDoesNotConsumeBudget) {
  SchedulerConfig c = TestConfig(64);
  c.max_num_batched_tokens = 16;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, 64, 3, /*base=*/5)));
  auto first = test::RunToCompletion(*s, w, 50);
  FOLIO_ASSERT_OK(first.status());
  EXPECT_EQ(first->at(1).num_cached_prompt_tokens, 0);
  EXPECT_GT(s->stats().num_steps, 4);  // 64 tokens through a 16-token budget

  struct Case {
    RequestId id;
    int32_t prompt_len;
    int32_t cached;
  };
  // 64 = 8 full blocks, but the last token is always computed: 7 hit.
  // 57 = 7 full blocks + 1: 7 hit, one token computed. 60: 7 hit, 4 computed.
  for (const Case& k : {Case{2, 64, 56}, Case{3, 57, 56}, Case{4, 60, 56}}) {
    FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(k.id, k.prompt_len, 3, /*base=*/5)));
    OutputCollector out;
    StepPlan plan;
    FOLIO_ASSERT_OK(test::Step(*s, w, out, &plan));
    ASSERT_EQ(plan.new_sequences.size(), 1u);
    EXPECT_EQ(plan.new_sequences[0].num_computed_tokens, k.cached);
    ASSERT_EQ(plan.scheduled.size(), 1u);
    EXPECT_EQ(plan.scheduled[0].start_position, k.cached);
    EXPECT_EQ(plan.num_scheduled_tokens, k.prompt_len - k.cached);
    EXPECT_EQ(plan.scheduled[0].sample_mode, SampleMode::kSample);  // whole prompt done in one step
    ASSERT_TRUE(out.contains(k.id));
    EXPECT_EQ(out.at(k.id).num_cached_prompt_tokens, k.cached);
    EXPECT_EQ(out.at(k.id).tokens().size(), 1u);
    FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 20));
    EXPECT_EQ(out.at(k.id).num_cached_prompt_tokens, k.cached);
    if (k.prompt_len == 64) {
      EXPECT_EQ(out.at(k.id).tokens(), first->at(1).tokens());
    }
    ExpectDrained(*s);
  }
  const KvCacheManager::PrefixCacheStats& ps = s->kv_cache().prefix_cache_stats();
  EXPECT_EQ(ps.hits, 3 * 56);
  // A different salt shares nothing.
  RequestSpec salted = MakeRequest(5, 64, 2, /*base=*/5);
  salted.cache_salt = "tenant-b";
  FOLIO_ASSERT_OK(s->AddRequest(salted));
  auto out = test::RunToCompletion(*s, w, 50);
  FOLIO_ASSERT_OK(out.status());
  EXPECT_EQ(out->at(5).num_cached_prompt_tokens, 0);
  ExpectDrained(*s);
}

// Hits on blocks a running request still holds: the blocks are shared by
// reference, not copied, and both produce their own tokens.
TEST(SchedulerScenarioTest, PrefixHitOnRunningRequestSharesBlocks) {
  SchedulerConfig c = TestConfig(64);
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, 40, 10, /*base=*/3)));
  OutputCollector out;
  FOLIO_ASSERT_OK(test::Step(*s, w, out));
  const int32_t used = s->kv_cache().device_pool().num_used_blocks();
  EXPECT_EQ(used, 5);
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(2, 44, 10, /*base=*/3)));
  StepPlan plan;
  FOLIO_ASSERT_OK(test::Step(*s, w, out, &plan));
  ASSERT_EQ(plan.new_sequences.size(), 1u);
  EXPECT_EQ(plan.new_sequences[0].num_computed_tokens, 40);
  // Request 1 grew one block (position 40); request 2 added one (40..43).
  EXPECT_EQ(s->kv_cache().device_pool().num_used_blocks(), 7);
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 50));
  EXPECT_EQ(out.at(2).num_cached_prompt_tokens, 40);
  ExpectDrained(*s);
}

// max_num_seqs bounds the running sequences, and admission is never stuck
// while the cache is free (vLLM #53130): a slot that frees is filled at once.
TEST(SchedulerScenarioTest, MaxNumSeqsBoundsRunningAndAdmissionIsNotStuck) {
  SchedulerConfig c = TestConfig(200);
  c.max_num_seqs = 4;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  for (RequestId id = 0; id < 12; ++id) {
    RequestSpec r = MakeRequest(id, 6 + id, 3 + (id * 5) % 11);
    if (id % 4 == 1) {
      r.sampling.n = 2;
      r.sampling.best_of = 2;
    }
    FOLIO_ASSERT_OK(s->AddRequest(r));
  }
  int32_t steps = 0;
  auto out = test::RunToCompletion(*s, w, 200, [&](const StepPlan& p, const Scheduler& sc) {
    ++steps;
    EXPECT_LE(static_cast<int32_t>(p.scheduled.size()), 4);
    EXPECT_LE(sc.num_running_sequences(), 4);
  });
  FOLIO_ASSERT_OK(out.status());
  ExpectDrained(*s);

  // Single-sequence requests: whenever some wait, all four slots are busy.
  for (RequestId id = 20; id < 32; ++id) FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(id, 5, 2 + id % 7)));
  OutputCollector more;
  for (int32_t step = 0; s->HasUnfinishedRequests(); ++step) {
    ASSERT_LT(step, 200);
    StepPlan plan;
    const int32_t waiting_before = s->num_waiting();
    FOLIO_ASSERT_OK(test::Step(*s, w, more, &plan));
    if (waiting_before > 0) {
      EXPECT_EQ(static_cast<int32_t>(plan.scheduled.size()), 4) << "step " << step;
    }
  }
  ExpectDrained(*s);
}

// Differential fuzz: random workloads (arrivals over time, shared prefixes,
// n / best_of / beam search, EOS, stop tokens, priorities) run starved in
// every preemption mode and policy must produce exactly the tokens of an
// ample run. Every request fits the starved pool on its own, unshared.
TEST(SchedulerScenarioTest, RandomWorkloadsStarvedMatchAmple) {
  int64_t swaps = 0;
  int64_t recomputes = 0;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    uint64_t x = seed * 0x9e3779b97f4a7c15ULL;
    auto rnd = [&](uint32_t n) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      return static_cast<int32_t>((x >> 33) % n);
    };
    struct Arrival {
      int32_t step;
      RequestSpec spec;
    };
    std::vector<Arrival> arrivals;
    for (RequestId id = 0; id < 30; ++id) {
      RequestSpec r = MakeRequest(id, 1 + rnd(48), 1 + rnd(40), /*base=*/rnd(4));
      r.eos_token_ids = {2};
      r.sampling.ignore_eos = rnd(3) == 0;
      r.sampling.stop_token_ids = {rnd(2) == 0 ? 3 : 7};
      r.priority = rnd(3);
      switch (rnd(6)) {
        case 0:
          r.sampling.n = 2;
          r.sampling.best_of = 3;
          break;
        case 1:
          r.sampling.n = 2;
          r.sampling.best_of = 2;
          break;
        case 2:
          r.sampling.beam_width = 3;
          r.sampling.n = 2;
          r.sampling.best_of = 2;
          break;
        default:
          break;
      }
      arrivals.push_back({rnd(60), std::move(r)});
    }
    auto run = [&](const SchedulerConfig& c, SchedulerStats* stats) {
      auto s = test::MakeScheduler(c);
      SimulatedWorker::Options wo = test::WorkerOptions(c);
      wo.vocab_size = 64;  // stop tokens and EOS come up
      wo.eos_token_id = 2;
      wo.eos_probability = 0.02;
      SimulatedWorker w(wo);
      OutputCollector out;
      for (int32_t step = 0; step < 5000; ++step) {
        for (const Arrival& a : arrivals) {
          if (a.step == step) {
            EXPECT_TRUE(s->AddRequest(a.spec).ok());
          }
        }
        if (step >= 60 && !s->HasUnfinishedRequests()) break;
        const absl::Status st = test::Step(*s, w, out);
        if (!st.ok()) {
          ADD_FAILURE() << "seed " << seed << ": " << st;
          break;
        }
      }
      *stats = s->stats();
      ExpectDrained(*s);
      return out;
    };
    SchedulerStats stats;
    const OutputCollector reference = run(TestConfig(400), &stats);
    ASSERT_EQ(reference.all().size(), 30u);
    for (PreemptionMode mode :
         {PreemptionMode::kAuto, PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
      for (SchedulingPolicy policy : {SchedulingPolicy::kFcfs, SchedulingPolicy::kPriority}) {
        SchedulerConfig c = TestConfig(36);  // 3 unshared sequences of 96 tokens fit
        c.preemption_mode = mode;
        c.policy = policy;
        c.num_host_blocks = 30;
        c.max_num_batched_tokens = 40;
        c.max_num_seqs = 10;
        c.enable_prefix_caching = seed % 2 == 0;
        const OutputCollector got = run(c, &stats);
        swaps += stats.num_preemptions_swap;
        recomputes += stats.num_preemptions_recompute;
        ASSERT_EQ(got.all().size(), 30u);
        for (const auto& [id, want] : reference.all()) {
          const test::CollectedRequest& g = got.at(id);
          ASSERT_EQ(g.sequences.size(), want.sequences.size()) << "seed " << seed << " id " << id;
          for (const auto& [i, seq] : want.sequences) {
            EXPECT_EQ(g.tokens(i), seq.token_ids)
                << "seed " << seed << " " << PreemptionModeName(mode) << " request " << id;
            EXPECT_EQ(g.reason(i), seq.finish_reason) << "seed " << seed << " request " << id;
          }
          EXPECT_EQ(g.error, want.error) << "seed " << seed << " request " << id;
        }
      }
    }
  }
  EXPECT_GT(swaps, 50);
  EXPECT_GT(recomputes, 50);
  std::printf("preemptions: %lld swap, %lld recompute\n", static_cast<long long>(swaps),
              static_cast<long long>(recomputes));
}

// A long random workload: preemption, prefix sharing, fan-out, aborts;
// after it drains, every block is free or cached and all counts are zero.
TEST(SchedulerScenarioTest, RandomWorkloadDrainsClean) {
  for (PreemptionMode mode :
       {PreemptionMode::kAuto, PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
    SchedulerConfig c = TestConfig(24);
    c.preemption_mode = mode;
    c.num_host_blocks = 12;
    c.max_num_batched_tokens = 40;
    c.max_num_seqs = 12;
    c.max_model_len = 160;
    c.policy = mode == PreemptionMode::kSwap ? SchedulingPolicy::kPriority : SchedulingPolicy::kFcfs;
    auto s = test::MakeScheduler(c);
    SimulatedWorker::Options wo = test::WorkerOptions(c);
    wo.eos_token_id = 2;
    wo.eos_probability = 0.02;
    SimulatedWorker w(wo);
    OutputCollector out;
    uint64_t x = 12345;
    auto rnd = [&](uint32_t n) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      return static_cast<int32_t>((x >> 33) % n);
    };
    RequestId next = 0;
    for (int32_t step = 0; step < 600; ++step) {
      if (rnd(3) == 0) {
        RequestSpec r = MakeRequest(next, 1 + rnd(70), 1 + rnd(60), /*base=*/rnd(6));
        r.sampling.ignore_eos = rnd(2) == 0;
        r.eos_token_ids = {2};
        r.priority = rnd(3);
        const int32_t kind = rnd(8);
        if (kind == 0) {
          r.sampling.n = 2;
          r.sampling.best_of = 3;
        } else if (kind == 1) {
          r.sampling.n = 3;
          r.sampling.best_of = 3;
        } else if (kind == 2) {
          r.sampling.beam_width = 2;
          r.sampling.n = 2;
          r.sampling.best_of = 2;
        }
        FOLIO_ASSERT_OK(s->AddRequest(r));
        ++next;
      }
      if (rnd(10) == 0 && next > 0) s->Abort(rnd(static_cast<uint32_t>(next)));
      FOLIO_ASSERT_OK(test::Step(*s, w, out)) ;
    }
    FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 3000));
    EXPECT_EQ(out.all().size(), static_cast<size_t>(next));
    for (const auto& [id, r] : out.all()) EXPECT_TRUE(r.finished) << id;
    ExpectDrained(*s);
  }
}

}  // namespace
}  // namespace folio
