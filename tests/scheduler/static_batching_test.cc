// Static batching (SchedulerConfig::batching = kStatic), the request-level
// batching of the PagedAttention paper's FasterTransformer baseline: a batch
// forms only when the previous one has finished to its last request, and then
// takes every waiting request that fits, whatever one step's token budget.

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
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

// Per step: how many requests were running before it and how many sequences
// it sent to the workers for the first time (admissions, with ample memory).
struct StepLog {
  std::vector<int32_t> running_before;
  std::vector<int32_t> admitted;
};

StepLog RunLogged(BatchingMode mode, const std::vector<int32_t>& output_lens,
                  OutputCollector& out) {
  SchedulerConfig c = TestConfig(400);
  c.batching = mode;
  c.max_num_seqs = 4;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  for (size_t i = 0; i < output_lens.size(); ++i) {
    EXPECT_TRUE(s->AddRequest(MakeRequest(static_cast<RequestId>(i + 1), 9, output_lens[i])).ok());
  }
  StepLog log;
  int32_t running = 0;
  for (int step = 0; s->HasUnfinishedRequests() && step < 500; ++step) {
    StepPlan plan;
    EXPECT_TRUE(test::Step(*s, w, out, &plan).ok());
    log.running_before.push_back(running);
    log.admitted.push_back(static_cast<int32_t>(plan.new_sequences.size()));
    running = s->num_running();
  }
  EXPECT_FALSE(s->HasUnfinishedRequests());
  ExpectDrained(*s);
  return log;
}

TEST(StaticBatchingTest, AdmitsOnlyOnceTheWholeBatchHasFinished) {
  // Two batches of four (max_num_seqs); the first batch's lengths differ, so
  // continuous batching would refill as soon as its shortest request ends.
  const std::vector<int32_t> lens = {3, 12, 5, 8, 4, 4, 6, 2};
  OutputCollector out;
  const StepLog log = RunLogged(BatchingMode::kStatic, lens, out);
  int32_t batches = 0;
  for (size_t i = 0; i < log.admitted.size(); ++i) {
    if (log.admitted[i] == 0) continue;
    ++batches;
    EXPECT_EQ(log.running_before[i], 0) << "step " << i << " admitted into a running batch";
    EXPECT_EQ(log.admitted[i], 4) << "step " << i;
  }
  EXPECT_EQ(batches, 2);
  for (size_t i = 0; i < lens.size(); ++i) {
    EXPECT_EQ(out.at(static_cast<RequestId>(i + 1)).tokens().size(), static_cast<size_t>(lens[i]));
  }
  // The same load under continuous batching refills a running batch.
  OutputCollector continuous_out;
  const StepLog continuous = RunLogged(BatchingMode::kContinuous, lens, continuous_out);
  bool refilled = false;
  for (size_t i = 0; i < continuous.admitted.size(); ++i) {
    refilled |= continuous.admitted[i] > 0 && continuous.running_before[i] > 0;
  }
  EXPECT_TRUE(refilled);
  EXPECT_LT(continuous.admitted.size(), log.admitted.size());
  for (size_t i = 0; i < lens.size(); ++i) {
    const auto id = static_cast<RequestId>(i + 1);
    EXPECT_EQ(continuous_out.at(id).tokens(), out.at(id).tokens()) << "request " << id;
  }
}

TEST(StaticBatchingTest, TheBatchFormsBeyondOneStepsTokenBudget) {
  SchedulerConfig c = TestConfig(400);
  c.batching = BatchingMode::kStatic;
  c.max_num_batched_tokens = 32;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  for (RequestId id = 1; id <= 5; ++id) FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(id, 20, 6)));
  OutputCollector out;
  StepPlan plan;
  FOLIO_ASSERT_OK(test::Step(*s, w, out, &plan));
  // All five joined the batch; the first step computed only its budget.
  EXPECT_EQ(s->num_running(), 5);
  EXPECT_EQ(s->num_waiting(), 0);
  EXPECT_LE(plan.num_scheduled_tokens, 32);
  // A request arriving now waits for the whole batch.
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(6, 4, 2)));
  while (s->num_running() > 0) {
    EXPECT_EQ(s->num_waiting(), 1);
    FOLIO_ASSERT_OK(test::Step(*s, w, out));
  }
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 50));
  for (RequestId id = 1; id <= 5; ++id) EXPECT_EQ(out.at(id).tokens().size(), 6u);
  EXPECT_EQ(out.at(6).tokens().size(), 2u);
  ExpectDrained(*s);
}

// FasterTransformer's batch as the paper ran it: static batching with each
// request's KV claimed for max_model_len, so memory bounds the batch size.
TEST(StaticBatchingTest, WithMaxReservationsMemoryBoundsTheBatch) {
  SchedulerConfig c = TestConfig(20);  // 160 slots of 8
  c.batching = BatchingMode::kStatic;
  c.reservation = ReservationPolicy::kMax;
  c.max_model_len = 64;  // 8 blocks a request: two fit
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  for (RequestId id = 1; id <= 5; ++id) FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(id, 10, 20)));
  OutputCollector out;
  FOLIO_ASSERT_OK(test::Step(*s, w, out));
  EXPECT_EQ(s->num_running(), 2);
  EXPECT_EQ(s->kv_cache().device_pool().num_used_blocks(), 16);
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 200));
  for (RequestId id = 1; id <= 5; ++id) {
    EXPECT_EQ(out.at(id).tokens().size(), 20u);
    EXPECT_TRUE(out.at(id).error.empty()) << out.at(id).error;
  }
  ExpectDrained(*s);
}

TEST(StaticBatchingTest, ParsesItsName) {
  EXPECT_EQ(*ParseBatchingMode("static"), BatchingMode::kStatic);
  EXPECT_EQ(*ParseBatchingMode("continuous"), BatchingMode::kContinuous);
  EXPECT_STREQ(BatchingModeName(BatchingMode::kStatic), "static");
  const absl::StatusOr<BatchingMode> bad = ParseBatchingMode("dynamic");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("'dynamic'"));
}

}  // namespace
}  // namespace folio
