// Scheduler::RequeueAfterWorkerLoss: a lost worker group is a recompute
// preemption of everything that ran. The SimulatedWorker's tokens are a
// pure function of each sequence's tokens so far, so a run whose workers
// are lost (and replaced by a fresh worker with an empty mirror and cache)
// must deliver exactly the outputs of an undisturbed run.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "scheduler/scheduler.h"
#include "scheduler/simulated_worker.h"
#include "tests/scheduler/scheduler_test_util.h"

namespace folio {
namespace {

using test::MakeRequest;
using test::OutputCollector;

SchedulerConfig LossConfig() {
  SchedulerConfig c = test::TestConfig(/*num_device_blocks=*/40);
  c.num_host_blocks = 24;  // some groups swap out under pressure
  c.max_num_batched_tokens = 64;
  return c;
}

// Greedy and seeded single sequences, n > 1 (streamed), best_of and beam
// search, two sharing a prompt (prefix-cache hits), one scoring its prompt.
std::vector<RequestSpec> Workload() {
  std::vector<RequestSpec> specs;
  for (RequestId id = 1; id <= 6; ++id) specs.push_back(MakeRequest(id, 20 + 7 * id, 30));
  specs[1].sampling.temperature = 0.8f;
  specs[1].sampling.seed = 42;
  specs[2].sampling.n = 3;
  specs[2].sampling.best_of = 3;
  specs[2].sampling.temperature = 1.0f;
  specs[2].sampling.seed = 5;
  specs[3].sampling.beam_width = 3;
  specs[3].sampling.temperature = 0.0f;
  specs[4].sampling.prompt_logprobs = 1;
  specs.push_back(MakeRequest(7, 40, 25, /*base=*/99));
  specs.push_back(MakeRequest(8, 40, 25, /*base=*/99));
  specs.push_back(MakeRequest(9, 24, 40));
  specs.back().sampling.n = 2;
  specs.back().sampling.best_of = 4;  // ranked: one final output
  specs.back().sampling.temperature = 1.0f;
  specs.back().sampling.seed = 9;
  return specs;
}

std::unique_ptr<Scheduler> Loaded(const SchedulerConfig& c) {
  std::unique_ptr<Scheduler> s = test::MakeScheduler(c);
  for (RequestSpec& spec : Workload()) EXPECT_TRUE(s->AddRequest(std::move(spec)).ok());
  return s;
}

// Runs the workload, losing the workers at each step in `loss_steps` (the
// plan of that step is scheduled, then lost before its result comes back).
absl::StatusOr<OutputCollector> RunLosing(Scheduler& s, const SchedulerConfig& c,
                                          std::vector<int32_t> loss_steps, int32_t max_requeues) {
  auto worker = std::make_unique<SimulatedWorker>(test::WorkerOptions(c));
  OutputCollector out;
  for (int32_t step = 0; s.HasUnfinishedRequests(); ++step) {
    if (step > 2000) return absl::DeadlineExceededError("not drained");
    if (std::find(loss_steps.begin(), loss_steps.end(), step) != loss_steps.end()) {
      StepPlan lost = s.Schedule();  // sent, never answered
      s.RequeueAfterWorkerLoss(max_requeues, "worker rank 0 at 127.0.0.1:1: no result");
      if (absl::Status st = s.CheckInvariants(); !st.ok()) return st;
      EXPECT_EQ(s.num_running(), 0);
      EXPECT_EQ(s.num_swapped(), 0);
      EXPECT_EQ(s.kv_cache().device_pool().num_used_blocks(), 0);
      EXPECT_EQ(s.kv_cache().device_pool().num_cached_free_blocks(), 0);
      EXPECT_EQ(s.kv_cache().host_pool().num_used_blocks(), 0);
      if (absl::Status st = out.Add(s.TakePendingOutputs()); !st.ok()) return st;
      worker = std::make_unique<SimulatedWorker>(test::WorkerOptions(c));  // fresh process
      continue;
    }
    if (absl::Status st = test::Step(s, *worker, out); !st.ok()) return st;
  }
  return out;
}

void ExpectSameOutputs(const OutputCollector& want, const OutputCollector& got) {
  ASSERT_EQ(want.all().size(), got.all().size());
  for (const auto& [id, w] : want.all()) {
    const test::CollectedRequest& g = got.at(id);
    EXPECT_TRUE(g.finished) << "request " << id;
    EXPECT_EQ(g.error, "") << "request " << id;
    ASSERT_EQ(w.sequences.size(), g.sequences.size()) << "request " << id;
    for (const auto& [index, seq] : w.sequences) {
      EXPECT_EQ(seq.token_ids, g.tokens(index)) << "request " << id << " sequence " << index;
      EXPECT_EQ(seq.finish_reason, g.reason(index)) << "request " << id << " sequence " << index;
    }
    EXPECT_EQ(w.num_output_tokens, g.num_output_tokens) << "request " << id;
  }
}

TEST(WorkerLossTest, RequeuedRequestsFinishWithTheOutputsOfAnUndisturbedRun) {
  const SchedulerConfig c = LossConfig();
  std::unique_ptr<Scheduler> clean = Loaded(c);
  absl::StatusOr<OutputCollector> want = RunLosing(*clean, c, {}, 2);
  FOLIO_ASSERT_OK(want.status());
  EXPECT_GT(clean->stats().num_preemptions_swap, 0) << "the workload should swap";
  test::ExpectDrained(*clean);

  // Losses early (prompts in flight), mid-run (forks, beams, swapped
  // groups) and late; two losses in a row; each request at most twice.
  for (const std::vector<int32_t>& losses :
       std::vector<std::vector<int32_t>>{{0}, {3}, {12}, {25, 26}, {8, 30}}) {
    SCOPED_TRACE(::testing::PrintToString(losses));
    std::unique_ptr<Scheduler> s = Loaded(c);
    absl::StatusOr<OutputCollector> got = RunLosing(*s, c, losses, 2);
    FOLIO_ASSERT_OK(got.status());
    ExpectSameOutputs(*want, *got);
    EXPECT_EQ(s->stats().num_worker_losses, static_cast<int64_t>(losses.size()));
    test::ExpectDrained(*s);
  }
}

TEST(WorkerLossTest, ARequestLostMoreThanMaxRequeuesTimesFailsNamingTheCause) {
  const SchedulerConfig c = LossConfig();
  std::unique_ptr<Scheduler> s = test::MakeScheduler(c);
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, 10, 50)));
  absl::StatusOr<OutputCollector> out = RunLosing(*s, c, {1, 3, 5}, /*max_requeues=*/2);
  FOLIO_ASSERT_OK(out.status());
  const test::CollectedRequest& r = out->at(1);
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(r.reason(), FinishReason::kError);
  EXPECT_THAT(r.error, ::testing::HasSubstr("worker rank 0 at 127.0.0.1:1: no result"));
  EXPECT_THAT(r.error, ::testing::HasSubstr("requeued 2 times already"));
  // What it had generated before the last loss is delivered, nothing lost.
  EXPECT_GT(r.num_output_tokens, 0);
  test::ExpectDrained(*s);
}

TEST(WorkerLossTest, FailModeEndsRunningRequestsAndKeepsWaitingOnesQueued) {
  SchedulerConfig c = LossConfig();
  c.max_num_seqs = 2;  // the third request waits
  std::unique_ptr<Scheduler> s = test::MakeScheduler(c);
  for (RequestId id = 1; id <= 3; ++id) FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(id, 10, 8)));
  absl::StatusOr<OutputCollector> out = RunLosing(*s, c, {2}, /*max_requeues=*/0);
  FOLIO_ASSERT_OK(out.status());
  for (RequestId id : {1, 2}) {
    EXPECT_EQ(out->at(id).reason(), FinishReason::kError) << id;
    EXPECT_EQ(out->at(id).error, "worker rank 0 at 127.0.0.1:1: no result") << id;
  }
  EXPECT_EQ(out->at(3).error, "");
  EXPECT_EQ(out->at(3).tokens().size(), 8u);
  test::ExpectDrained(*s);
}

TEST(WorkerLossTest, AnIdleLossForgetsTheCachedPrefixes) {
  const SchedulerConfig c = LossConfig();
  std::unique_ptr<Scheduler> s = test::MakeScheduler(c);
  auto worker = std::make_unique<SimulatedWorker>(test::WorkerOptions(c));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, 40, 4, /*base=*/3)));
  OutputCollector out;
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, *worker, out, 50));
  ASSERT_GT(s->kv_cache().device_pool().num_cached_free_blocks(), 0);
  s->RequeueAfterWorkerLoss(2, "worker rank 0: health check failed");  // nothing running
  EXPECT_EQ(s->kv_cache().device_pool().num_cached_free_blocks(), 0);
  // The same prompt again computes every token: the new worker has no KV.
  worker = std::make_unique<SimulatedWorker>(test::WorkerOptions(c));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(2, 40, 4, /*base=*/3)));
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, *worker, out, 50));
  EXPECT_EQ(out.at(2).num_cached_prompt_tokens, 0);
  EXPECT_EQ(out.at(1).tokens(), out.at(2).tokens());
  test::ExpectDrained(*s);
}

}  // namespace
}  // namespace folio
