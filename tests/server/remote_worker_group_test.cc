// RemoteWorkerGroup against fake folio.v1.Worker servers on 127.0.0.1 (each
// answers Initialize with what the test sets, and every plan with an empty
// result after a set delay): Rebuild() refuses a rank that comes back with
// another model or fewer blocks and accepts it once it matches; a step's
// deadline adapts to the measured step times (StepTimeout); a step past it
// fails the group until it is rebuilt; the idle health check names a rank
// that stopped answering.

#include <atomic>
#include <memory>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "folio/v1/worker.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "scheduler/server/remote_worker_group.h"

namespace folio {
namespace {

using ::testing::HasSubstr;

class FakeWorker final : public v1::Worker::Service {
 public:
  std::atomic<uint32_t> num_device_blocks{100};
  std::atomic<uint32_t> vocab_size{2048};
  std::atomic<int> step_delay_ms{0};
  std::atomic<int> initializations{0};

  grpc::Status Initialize(grpc::ServerContext*, const v1::InitializeRequest*,
                          v1::InitializeResponse* response) override {
    ++initializations;
    response->set_num_device_blocks(num_device_blocks);
    response->set_num_host_blocks(0);
    response->set_block_bytes(4096);
    response->set_vocab_size(vocab_size);
    response->set_device_name("fake");
    return grpc::Status::OK;
  }
  grpc::Status AllocateCache(grpc::ServerContext*, const v1::AllocateCacheRequest*,
                             v1::AllocateCacheResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status Step(grpc::ServerContext*,
                    grpc::ServerReaderWriter<v1::StepResult, v1::StepPlan>* stream) override {
    v1::StepPlan plan;
    while (stream->Read(&plan)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(step_delay_ms.load()));
      v1::StepResult result;
      result.set_step_id(plan.step_id());
      if (!stream->Write(result)) break;
    }
    return grpc::Status::OK;
  }
};

class RemoteWorkerGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::EnableDefaultHealthCheckService(true);  // as folio-worker serves grpc.health.v1
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&fake_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    RemoteWorkerGroup::Options o;
    o.addresses = {absl::StrCat("127.0.0.1:", port_)};
    o.connect_timeout = absl::Seconds(10);
    o.step_timeout = absl::Seconds(30);
    o.step_timeout_min = absl::Milliseconds(300);
    o.step_timeout_multiple = 10;
    options_ = o;
    absl::StatusOr<std::unique_ptr<RemoteWorkerGroup>> group = RemoteWorkerGroup::Connect(o);
    ASSERT_TRUE(group.ok()) << group.status();
    group_ = std::move(*group);
  }
  void TearDown() override {
    group_.reset();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  absl::StatusOr<StepResult> Step(int32_t prefill_tokens = 0) {
    StepPlan plan;
    plan.step_id = ++step_id_;
    ScheduledSequence s;
    s.token_ids.assign(prefill_tokens + 1, 1);
    plan.scheduled.push_back(s);
    plan.num_scheduled_tokens = prefill_tokens + 1;
    return group_->Execute(plan);
  }

  FakeWorker fake_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  RemoteWorkerGroup::Options options_;
  std::unique_ptr<RemoteWorkerGroup> group_;
  uint64_t step_id_ = 0;
};

TEST_F(RemoteWorkerGroupTest, RebuildRefusesARankWithFewerBlocksOrAnotherModel) {
  ASSERT_EQ(group_->num_device_blocks(), 100);
  fake_.num_device_blocks = 60;
  absl::Status s = group_->Rebuild();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("worker rank 0 at 127.0.0.1:"));
  EXPECT_THAT(s.message(), HasSubstr("room for 60 device and 0 host blocks; the scheduler's "
                                     "pools hold 100 and 0: refused"));
  EXPECT_FALSE(Step().ok()) << "a refused rebuild leaves the group broken";
  fake_.num_device_blocks = 120;  // more is fine: the pools stay 100
  fake_.vocab_size = 32000;
  s = group_->Rebuild();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("another model or tensor-parallel layout (vocab 32000"));
  fake_.vocab_size = 2048;
  EXPECT_TRUE(group_->Rebuild().ok());
  EXPECT_EQ(group_->num_device_blocks(), 100);
  EXPECT_TRUE(Step().ok());
  EXPECT_EQ(fake_.initializations.load(), 4);
}

TEST_F(RemoteWorkerGroupTest, TheStepDeadlineAdaptsToMeasuredSteps) {
  StepPlan decode;
  decode.scheduled.emplace_back().token_ids = {1};
  // Until a few steps are measured: the ceiling.
  EXPECT_EQ(group_->StepTimeout(decode), absl::Seconds(30));
  fake_.step_delay_ms = 50;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Step().ok());
  // 10 x ~50 ms, above the 300 ms floor.
  const absl::Duration t = group_->StepTimeout(decode);
  EXPECT_GE(t, absl::Milliseconds(500));
  EXPECT_LT(t, absl::Seconds(3));
  // A prefill of 999 tokens more gets 10 x its tokens x the slowest seconds
  // per token seen (~50 ms per one-token step): capped by the ceiling.
  StepPlan prefill;
  prefill.scheduled.emplace_back().token_ids.assign(1000, 1);
  EXPECT_EQ(group_->StepTimeout(prefill), absl::Seconds(30));
  StepPlan short_prefill;
  short_prefill.scheduled.emplace_back().token_ids.assign(3, 1);
  EXPECT_GT(group_->StepTimeout(short_prefill), t + absl::Milliseconds(900));
}

TEST_F(RemoteWorkerGroupTest, AStepPastItsDeadlineFailsTheGroupUntilRebuilt) {
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Step().ok());  // fast: the floor, 300 ms, rules
  fake_.step_delay_ms = 2000;
  const absl::Time start = absl::Now();
  absl::StatusOr<StepResult> slow = Step();
  EXPECT_EQ(slow.status().code(), absl::StatusCode::kDeadlineExceeded) << slow.status();
  EXPECT_THAT(slow.status().message(), HasSubstr("did not finish step"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1.5));
  EXPECT_FALSE(Step().ok());
  fake_.step_delay_ms = 0;
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));  // the hung step ends
  ASSERT_TRUE(group_->Rebuild().ok());
  EXPECT_TRUE(Step().ok());
}

TEST_F(RemoteWorkerGroupTest, HealthCheckNamesTheRankThatStoppedAnswering) {
  EXPECT_TRUE(group_->CheckHealth().ok());
  server_->Shutdown(std::chrono::system_clock::now());
  const absl::Status s = group_->CheckHealth();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("worker rank 0 at 127.0.0.1:"));
  EXPECT_THAT(s.message(), HasSubstr("health check failed"));
}

}  // namespace
}  // namespace folio
