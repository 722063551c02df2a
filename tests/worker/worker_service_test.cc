// folio.v1.Worker end to end: two real folio-worker processes (TP = 2 over
// Gloo on 127.0.0.1) driven through Initialize -> AllocateCache -> Step with
// plans from a real Scheduler on the demo model give the greedy tokens of
// the in-process CpuWorker; failed steps come back as statuses and the
// stream keeps serving; Shutdown and SIGTERM stop the processes. Plus the
// call-order errors of an in-process WorkerService, and `device: cuda` on a
// machine without a CUDA device (or a build without CUDA): a clear error,
// after which a CPU Initialize still works. Initialize called again on a
// live rank is tested in worker_service_again_test.cc.

#include "worker/worker_service.h"

#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/model_config.h"
#include "common/plan_proto.h"
#include "tests/worker/worker_service_test_util.h"
#include "tests/worker/worker_test_util.h"
#include "worker/cache_engine.h"
#if defined(FOLIO_HAVE_CUDA_WORKER)
#include "worker/cuda_worker.h"
#endif

extern char** environ;

namespace folio {
namespace {

// A folio-worker child process; its port is read from its first stdout line.
class WorkerProcess {
 public:
  explicit WorkerProcess(int rank) {
    int fds[2];
    if (pipe(fds) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    const std::string bin = FOLIO_WORKER_BIN, r = std::to_string(rank);
    std::vector<const char*> argv = {bin.c_str(), "--host", "127.0.0.1", "--port", "0",
                                     "--rank", r.c_str(), "--collective-timeout-s", "60",
                                     nullptr};
    if (posix_spawn(&pid_, bin.c_str(), &actions, nullptr, const_cast<char**>(argv.data()),
                    environ) != 0) {
      pid_ = -1;
    }
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    out_ = fds[0];
  }
  ~WorkerProcess() {
    if (pid_ > 0 && !WaitExit(10)) {
      kill(pid_, SIGKILL);
      WaitExit(10);
    }
    if (out_ >= 0) close(out_);
  }

  // The port from "... listening on 127.0.0.1:PORT", within `seconds`.
  int ReadPort(int seconds) {
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (line.find('\n') == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return -1;
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return -1;
      char buf[256];
      const ssize_t n = read(out_, buf, sizeof(buf));
      if (n <= 0) return -1;
      line.append(buf, n);
    }
    const size_t colon = line.rfind(':', line.find('\n'));
    return colon == std::string::npos ? -1 : std::atoi(line.c_str() + colon + 1);
  }

  // Waits (without sleeping: poll on a pidfd) for the process to exit.
  bool WaitExit(int seconds) {
    if (pid_ <= 0) return true;
    const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
    if (fd >= 0) {
      pollfd p{fd, POLLIN, 0};
      const int ready = poll(&p, 1, seconds * 1000);
      close(fd);
      if (ready <= 0) return false;
    }
    int status = 0;
    if (waitpid(pid_, &status, 0) != pid_) return false;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    pid_ = -1;
    return true;
  }
  void Signal(int sig) {
    if (pid_ > 0) kill(pid_, sig);
  }
  int exit_code() const { return exit_code_; }
  bool started() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  int exit_code_ = -1;
};

TEST_F(WorkerProcessesTest, TwoRanksGiveTheGreedyTokensOfTheInProcessWorker) {
  constexpr int kWorld = 2;
  std::vector<std::unique_ptr<WorkerProcess>> procs;
  std::vector<std::unique_ptr<v1::Worker::Stub>> stubs;
  for (int r = 0; r < kWorld; ++r) {
    procs.push_back(std::make_unique<WorkerProcess>(r));
    ASSERT_TRUE(procs.back()->started());
    const int port = procs.back()->ReadPort(30);
    ASSERT_GT(port, 0) << "rank " << r << " did not report its port";
    stubs.push_back(v1::Worker::NewStub(Channel(port)));
  }

  // Initialize blocks until every rank joined the group: call them together.
  std::vector<grpc::Status> init_status(kWorld);
  std::vector<v1::InitializeResponse> init(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      grpc::ClientContext ctx;
      ctx.set_deadline(In(120));
      v1::InitializeRequest req;
      req.set_model_path(kDemo);
      req.set_rank(r);
      req.set_world_size(kWorld);
      req.set_device("cpu");
      req.set_block_size(16);
      req.set_kv_cache_bytes(kKvBytes);
      req.set_swap_space_bytes(kSwapBytes);
      req.set_rendezvous_address(rendezvous_address_);
      req.set_rendezvous_prefix("worker-service-test");
      init_status[r] = stubs[r]->Initialize(&ctx, req, &init[r]);
    });
  }
  for (auto& t : threads) t.join();
  uint32_t device_blocks = UINT32_MAX, host_blocks = UINT32_MAX;
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(init_status[r].ok()) << "rank " << r << ": " << init_status[r].error_message();
    EXPECT_EQ(init[r].vocab_size(), 2048u);
    EXPECT_EQ(init[r].device_name(), "cpu");
    EXPECT_GT(init[r].block_bytes(), 0u);
    device_blocks = std::min(device_blocks, init[r].num_device_blocks());
    host_blocks = std::min(host_blocks, init[r].num_host_blocks());
  }
  ASSERT_GT(device_blocks, 0u);
  for (int r = 0; r < kWorld; ++r) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(60));
    v1::AllocateCacheRequest req;
    req.set_num_device_blocks(device_blocks);
    req.set_num_host_blocks(host_blocks);
    v1::AllocateCacheResponse resp;
    grpc::Status s = stubs[r]->AllocateCache(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.device_bytes(), uint64_t{device_blocks} * init[r].block_bytes());
  }

  // One Step stream per rank; every plan goes to both.
  std::vector<std::unique_ptr<grpc::ClientContext>> step_ctx;
  std::vector<std::unique_ptr<grpc::ClientReaderWriter<v1::StepPlan, v1::StepResult>>> streams;
  for (int r = 0; r < kWorld; ++r) {
    step_ctx.push_back(std::make_unique<grpc::ClientContext>());
    step_ctx.back()->set_deadline(In(300));
    streams.push_back(stubs[r]->Step(step_ctx.back().get()));
  }
  auto round_trip = [&](const v1::StepPlan& proto, std::vector<v1::StepResult>& results) {
    for (int r = 0; r < kWorld; ++r) ASSERT_TRUE(streams[r]->Write(proto));
    results.assign(kWorld, {});
    for (int r = 0; r < kWorld; ++r) {
      ASSERT_TRUE(streams[r]->Read(&results[r]));
      EXPECT_EQ(results[r].step_id(), proto.step_id());
      EXPECT_EQ(results[r].rank(), uint32_t(r));
      EXPECT_GE(results[r].forward_seconds(), results[r].allreduce_seconds());
    }
  };

  const auto prompts = testing::MixedPrompts(2040, 8, 3);
  SchedulerConfig sc;
  sc.num_device_blocks = static_cast<int32_t>(device_blocks);
  sc.num_host_blocks = static_cast<int32_t>(host_blocks);
  sc.max_num_batched_tokens = 64;
  sc.max_model_len = 512;
  auto scheduler = Scheduler::Create(sc);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  int steps = 0;
  auto tokens = testing::RunGreedy(**scheduler, prompts,
                                   [&](const StepPlan& plan) -> absl::StatusOr<StepResult> {
    v1::StepPlan proto;
    ToProto(plan, &proto);
    std::vector<v1::StepResult> results;
    round_trip(proto, results);
    if (results.size() != size_t(kWorld)) return absl::InternalError("no results");
    for (int r = 0; r < kWorld; ++r) {
      if (absl::Status s = FromProto(results[r].status()); !s.ok()) return s;
    }
    if (results[1].samples_size() != 0) return absl::InternalError("samples from rank 1");
    if (plan.num_scheduled_tokens > 0 && results[1].allreduce_seconds() <= 0.0) {
      return absl::InternalError("rank 1 reported no all-reduce time");
    }
    ++steps;
    StepResult out;
    if (absl::Status s = FromProto(results[0], &out); !s.ok()) return s;
    return out;
  });
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_GT(steps, 8);
  EXPECT_EQ((*scheduler)->kv_cache().num_free_device_blocks(), static_cast<int32_t>(device_blocks));
  EXPECT_EQ(*tokens, Reference(prompts, static_cast<int32_t>(device_blocks),
                               static_cast<int32_t>(host_blocks)));

  // A bad plan fails on every rank with a status naming the field; the
  // streams keep serving.
  v1::StepPlan bad;
  bad.set_step_id(100000);
  bad.set_num_scheduled_tokens(3);
  std::vector<v1::StepResult> results;
  round_trip(bad, results);
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(results[r].status().code(), int(absl::StatusCode::kInvalidArgument));
    EXPECT_NE(results[r].status().message().find("num_scheduled_tokens"), std::string::npos);
  }
  v1::StepPlan unknown;  // schedules a sequence the workers never saw
  unknown.set_step_id(100001);
  auto* work = unknown.add_scheduled();
  work->set_seq_id(987654);
  work->add_token_ids(1);
  unknown.set_num_scheduled_tokens(1);
  round_trip(unknown, results);
  for (int r = 0; r < kWorld; ++r) EXPECT_NE(results[r].status().code(), 0);
  v1::StepPlan empty;
  empty.set_step_id(100002);
  round_trip(empty, results);
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(results[r].status().code(), 0);

  for (int r = 0; r < kWorld; ++r) {
    streams[r]->WritesDone();
    grpc::Status s = streams[r]->Finish();
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  // Shutdown: each answers, then its process exits 0.
  for (int r = 0; r < kWorld; ++r) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(30));
    v1::ShutdownRequest req;
    req.set_grace_seconds(5);
    v1::ShutdownResponse resp;
    grpc::Status s = stubs[r]->Shutdown(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(procs[r]->WaitExit(30)) << "rank " << r << " did not exit";
    EXPECT_EQ(procs[r]->exit_code(), 0);
  }
}

TEST_F(WorkerProcessesTest, SigtermStopsAWorkerGracefully) {
  WorkerProcess proc(0);
  ASSERT_TRUE(proc.started());
  ASSERT_GT(proc.ReadPort(30), 0);
  proc.Signal(SIGTERM);
  ASSERT_TRUE(proc.WaitExit(30));
  EXPECT_EQ(proc.exit_code(), 0);
}

// In-process service: the call order is enforced and failures are retryable.
TEST(WorkerServiceTest, CallOrderAndRetryableInitialize) {
  bool stopped = false;
  WorkerService::Options options;
  options.on_shutdown = [&] { stopped = true; };
  InProcessWorker worker(options);
  ASSERT_NE(worker.server, nullptr);
  auto& server = worker.server;
  auto& stub = worker.stub;

  auto allocate = [&](uint32_t blocks) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(30));
    v1::AllocateCacheRequest req;
    req.set_num_device_blocks(blocks);
    v1::AllocateCacheResponse resp;
    return stub->AllocateCache(&ctx, req, &resp).error_code();
  };
  auto initialize = [&](const std::string& model, v1::InitializeResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(60));
    v1::InitializeRequest req;
    req.set_model_path(model);
    req.set_kv_cache_bytes(kKvBytes);
    return stub->Initialize(&ctx, req, resp).error_code();
  };
  auto step_status = [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(30));
    auto stream = stub->Step(&ctx);
    stream->WritesDone();
    return stream->Finish().error_code();
  };
  v1::InitializeResponse resp;
  EXPECT_EQ(allocate(8), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(step_status(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(initialize("/nonexistent/model", &resp), grpc::StatusCode::OK);
  ASSERT_EQ(initialize(kDemo, &resp), grpc::StatusCode::OK);
  EXPECT_EQ(resp.num_device_blocks(), uint32_t(kKvBytes / resp.block_bytes()));
  // Initializing a loaded worker again loads it again (the group rebuilt);
  // a failed one leaves it new.
  ASSERT_EQ(initialize(kDemo, &resp), grpc::StatusCode::OK);
  EXPECT_NE(initialize("/nonexistent/model", &resp), grpc::StatusCode::OK);
  EXPECT_EQ(allocate(8), grpc::StatusCode::FAILED_PRECONDITION);
  ASSERT_EQ(initialize(kDemo, &resp), grpc::StatusCode::OK);
  EXPECT_EQ(step_status(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(allocate(0), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(allocate(8), grpc::StatusCode::OK);
  EXPECT_EQ(allocate(8), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(step_status(), grpc::StatusCode::OK);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(30));
    v1::ShutdownResponse sresp;
    EXPECT_TRUE(stub->Shutdown(&ctx, v1::ShutdownRequest(), &sresp).ok());
  }
  EXPECT_TRUE(stopped);
  EXPECT_EQ(step_status(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(initialize(kDemo, &resp), grpc::StatusCode::UNAVAILABLE);
  server->Shutdown(In(5));
}

// True when this test can expect `device: cuda` to fail: no CUDA worker in
// the build, or no CUDA device on the machine.
bool CudaMustFail() {
#if defined(FOLIO_HAVE_CUDA_WORKER)
  return !CudaWorker::DeviceCount().ok();
#else
  return true;
#endif
}

grpc::Status InitializeOn(v1::Worker::Stub& stub, const std::string& device,
                          v1::InitializeResponse* resp, v1::DType dtype = v1::DTYPE_UNSPECIFIED,
                          const std::string& kv_cache_dtype = "") {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(60));
  v1::InitializeRequest req;
  req.set_model_path(kDemo);
  req.set_device(device);
  req.set_dtype(dtype);
  req.set_kv_cache_bytes(kKvBytes);
  req.set_kv_cache_dtype(kv_cache_dtype);
  return stub.Initialize(&ctx, req, resp);
}

// InitializeRequest.kv_cache_dtype: a bad name or a quantized cache on CUDA
// (checked before any device is touched, so on every machine) is refused
// naming the field; on the CPU the worker sizes its blocks in the type and
// reports it, "auto" resolved. Nothing runs on the quantized cache here.
TEST(WorkerServiceTest, KvCacheDtypeIsCheckedSizedAndReported) {
  WorkerService::Options options;
#if defined(FOLIO_HAVE_CUDA_WORKER)
  options.cuda_loader = LoadCudaWorker;  // as folio-worker sets it
#endif
  InProcessWorker worker(options);
  ASSERT_NE(worker.server, nullptr);
  auto& server = worker.server;
  auto& stub = worker.stub;

  v1::InitializeResponse resp;
  for (const std::string device : {"cpu", "cuda:0"}) {
    grpc::Status s = InitializeOn(*stub, device, &resp, v1::DTYPE_UNSPECIFIED, "int4");
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << device;
    EXPECT_NE(s.error_message().find("InitializeRequest.kv_cache_dtype: --kv-cache-dtype 'int4'"),
              std::string::npos)
        << s.error_message();
  }
  for (const std::string name : {"int8", "fp8", "fp8_e4m3"}) {
    grpc::Status s = InitializeOn(*stub, "cuda:0", &resp, v1::DTYPE_UNSPECIFIED, name);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << name;
    EXPECT_NE(s.error_message().find("InitializeRequest.kv_cache_dtype \"" + name +
                                     "\": a quantized KV cache runs on the CPU worker only"),
              std::string::npos)
        << s.error_message();
  }

  absl::StatusOr<ModelConfig> config = ModelConfig::LoadFromDirectory(kDemo);
  ASSERT_TRUE(config.ok()) << config.status();
  struct Case {
    std::string name;
    kernels::CacheDtype dtype;
    std::string reported;
  };
  const Case cases[] = {{"", kernels::CacheDtype::kFloat32, "float32"},
                        {"auto", kernels::CacheDtype::kFloat32, "float32"},
                        {"int8", kernels::CacheDtype::kInt8, "int8"},
                        {"fp8", kernels::CacheDtype::kFp8E4m3, "fp8_e4m3"}};
  uint32_t fp32_blocks = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(InitializeOn(*stub, "cpu", &resp, v1::DTYPE_UNSPECIFIED, c.name).ok());
    EXPECT_EQ(resp.kv_cache_dtype(), c.reported);
    EXPECT_EQ(resp.block_bytes(),
              static_cast<uint64_t>(CacheEngine::BytesPerBlock(
                  config->num_layers, config->num_kv_heads, config->head_dim, 16, c.dtype)));
    EXPECT_EQ(resp.num_device_blocks(), uint32_t(kKvBytes / resp.block_bytes()));
    if (c.dtype == kernels::CacheDtype::kFloat32) fp32_blocks = resp.num_device_blocks();
  }
  // One-byte codes: the same bytes hold about 4x the blocks (less the
  // scales and their padding).
  ASSERT_TRUE(InitializeOn(*stub, "cpu", &resp, v1::DTYPE_UNSPECIFIED, "int8").ok());
  EXPECT_GT(resp.num_device_blocks(), 3 * fp32_blocks);
  EXPECT_LE(resp.num_device_blocks(), 4 * fp32_blocks);
  server->Shutdown(In(5));
}

TEST(WorkerServiceTest, CudaWithoutADeviceFailsClearlyAndCpuStillWorks) {
  if (!CudaMustFail()) GTEST_SKIP() << "this machine has a CUDA device";
  WorkerService::Options options;
#if defined(FOLIO_HAVE_CUDA_WORKER)
  options.cuda_loader = LoadCudaWorker;  // as folio-worker sets it
#endif
  InProcessWorker worker(options);
  ASSERT_NE(worker.server, nullptr);
  auto& server = worker.server;
  auto& stub = worker.stub;

  v1::InitializeResponse resp;
  for (const std::string device : {"cuda", "cuda:0", "cuda:3"}) {
    grpc::Status s = InitializeOn(*stub, device, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << device;
    EXPECT_NE(s.error_message().find("InitializeRequest.device \"" + device + "\""),
              std::string::npos)
        << s.error_message();
#if defined(FOLIO_HAVE_CUDA_WORKER)
    EXPECT_NE(s.error_message().find("cudaGetDeviceCount"), std::string::npos)
        << s.error_message();
#else
    EXPECT_NE(s.error_message().find("without CUDA"), std::string::npos) << s.error_message();
#endif
  }
  for (const std::string device : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CPU"}) {
    grpc::Status s = InitializeOn(*stub, device, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << device;
    EXPECT_NE(s.error_message().find("InitializeRequest.device"), std::string::npos)
        << s.error_message();
  }
  {
    // No fp16 kernels on the CPU (bf16 and fp32 weights are served).
    grpc::Status s = InitializeOn(*stub, "cpu", &resp, v1::DTYPE_FLOAT16);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("InitializeRequest.dtype FLOAT16"), std::string::npos)
        << s.error_message();
  }

  // The failures left the service as new: the CPU worker loads and steps.
  ASSERT_TRUE(InitializeOn(*stub, "cpu", &resp).ok());
  EXPECT_EQ(resp.device_name(), "cpu");
  EXPECT_EQ(resp.num_device_blocks(), uint32_t(kKvBytes / resp.block_bytes()));
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(30));
    v1::AllocateCacheRequest req;
    req.set_num_device_blocks(8);
    v1::AllocateCacheResponse aresp;
    ASSERT_TRUE(stub->AllocateCache(&ctx, req, &aresp).ok());
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(30));
    auto stream = stub->Step(&ctx);
    v1::StepPlan plan;
    plan.set_step_id(1);
    ASSERT_TRUE(stream->Write(plan));
    v1::StepResult result;
    ASSERT_TRUE(stream->Read(&result));
    EXPECT_EQ(result.step_id(), 1u);
    EXPECT_EQ(result.status().code(), 0) << result.status().message();
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
  }
  server->Shutdown(In(5));
}

// The same through the folio-worker binary: its build decides whether it has
// a CUDA loader, the machine whether it has a device.
TEST_F(WorkerProcessesTest, CudaInitializeFailsClearlyWithoutADevice) {
  if (!CudaMustFail()) GTEST_SKIP() << "this machine has a CUDA device";
  WorkerProcess proc(0);
  ASSERT_TRUE(proc.started());
  const int port = proc.ReadPort(30);
  ASSERT_GT(port, 0);
  auto stub = v1::Worker::NewStub(Channel(port));
  v1::InitializeResponse resp;
  grpc::Status s = InitializeOn(*stub, "cuda:0", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("InitializeRequest.device \"cuda:0\""), std::string::npos)
      << s.error_message();
  ASSERT_TRUE(InitializeOn(*stub, "cpu", &resp).ok());
  EXPECT_EQ(resp.device_name(), "cpu");
  grpc::ClientContext ctx;
  ctx.set_deadline(In(30));
  v1::ShutdownResponse sresp;
  EXPECT_TRUE(stub->Shutdown(&ctx, v1::ShutdownRequest(), &sresp).ok());
  ASSERT_TRUE(proc.WaitExit(30));
  EXPECT_EQ(proc.exit_code(), 0);
}

}  // namespace
}  // namespace folio
