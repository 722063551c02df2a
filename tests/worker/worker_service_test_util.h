#ifndef FOLIO_TESTS_WORKER_WORKER_SERVICE_TEST_UTIL_H_
#define FOLIO_TESTS_WORKER_WORKER_SERVICE_TEST_UTIL_H_

// Helpers shared by the folio.v1.Worker tests (worker_service_test.cc and
// worker_service_again_test.cc): the demo model and its pool sizes, a gRPC
// channel to a worker, the greedy tokens of the in-process CpuWorker as the
// reference, and a fixture that runs the rendezvous service the ranks meet
// through.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/rendezvous_service.h"
#include "scheduler/scheduler.h"
#include "tests/worker/worker_test_util.h"
#include "worker/cpu_worker.h"
#include "worker/worker_service.h"

namespace folio {

inline const std::string kDemo = std::string(FOLIO_SOURCE_DIR) + "/models/folio-demo";
inline constexpr int64_t kKvBytes = int64_t{8} << 20;
inline constexpr int64_t kSwapBytes = int64_t{2} << 20;

inline std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

inline std::shared_ptr<grpc::Channel> Channel(int port) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxWorkerMessageBytes);
  args.SetMaxSendMessageSize(kMaxWorkerMessageBytes);
  return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials(), args);
}

// A WorkerService with `options`, served in this process on a free port,
// and a stub to it (server null when it did not start).
struct InProcessWorker {
  explicit InProcessWorker(WorkerService::Options options) : service(std::move(options)) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    if (server != nullptr) stub = v1::Worker::NewStub(Channel(port));
  }
  WorkerService service;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::Worker::Stub> stub;
};

// Greedy tokens of the in-process worker (TP = 1) with the same pools.
inline std::vector<std::vector<TokenId>> Reference(const std::vector<testing::Prompt>& prompts,
                                                   int32_t device_blocks, int32_t host_blocks) {
  CpuWorker::Options o;
  o.model_dir = kDemo;
  o.num_device_blocks = device_blocks;
  o.num_host_blocks = host_blocks;
  absl::StatusOr<std::unique_ptr<CpuWorker>> worker = CpuWorker::Create(o);
  EXPECT_TRUE(worker.ok()) << worker.status();
  SchedulerConfig sc;
  sc.num_device_blocks = device_blocks;
  sc.num_host_blocks = host_blocks;
  sc.max_num_batched_tokens = 64;
  sc.max_model_len = 512;
  auto scheduler = Scheduler::Create(sc);
  EXPECT_TRUE(scheduler.ok());
  auto tokens = testing::RunGreedy(**scheduler, prompts, [&](const StepPlan& plan) {
    return (*worker)->Execute(plan);
  });
  EXPECT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ((*scheduler)->kv_cache().num_free_device_blocks(), device_blocks);
  return tokens.ok() ? *tokens : std::vector<std::vector<TokenId>>{};
}

class WorkerProcessesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&rendezvous_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    rendezvous_address_ = "127.0.0.1:" + std::to_string(port);
  }
  void TearDown() override {
    rendezvous_.Shutdown();
    server_->Shutdown(In(5));
  }

  RendezvousService rendezvous_;
  std::unique_ptr<grpc::Server> server_;
  std::string rendezvous_address_;
};

}  // namespace folio

#endif  // FOLIO_TESTS_WORKER_WORKER_SERVICE_TEST_UTIL_H_
