// Scenario tests (see scheduler_scenario_test.cc): aborts wherever the
// request is, prompts and groups that can never fit or cannot grow, and the
// requests behind them: everything ends, nothing hangs or leaks.
// Every workload runs through the real Scheduler and a SimulatedWorker that
// verifies the KV mapping each step, with bounded step loops (a hang is a
// failure, never a stuck test), and ends drained.

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
  r.sampling.best_of = 3;
  const absl::Status st = s->AddRequest(r);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("best_of must be at most 2 (max_num_seqs)"));
  r.sampling.n = 3;  // n itself is too many: the message names it
  const absl::Status st_n = s->AddRequest(r);
  EXPECT_THAT(std::string(st_n.message()), HasSubstr("n must be at most 2 (max_num_seqs)"));

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

}  // namespace
}  // namespace folio
