// folio.v1.Worker end to end: two real folio-worker processes (TP = 2 over
// Gloo on 127.0.0.1) driven through Initialize -> AllocateCache -> Step with
// plans from a real Scheduler on the demo model give the greedy tokens of
// the in-process CpuWorker; failed steps come back as statuses and the
// stream keeps serving; Shutdown and SIGTERM stop the processes. Plus the
// call-order errors of an in-process WorkerService, and `device: cuda` on a
// machine without a CUDA device (or a build without CUDA): a clear error,
// after which a CPU Initialize still works. And Initialize again, as the
// scheduler rebuilding the group after a rank failed calls it (in-process
// services, one rank or two over shared memory): the same answer, the same
// tokens, a step blocked on a hung peer aborted, an open stream waited for.

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

#include "common/plan_proto.h"
#include "google/protobuf/util/message_differencer.h"
#include "scheduler/rendezvous_service.h"
#include "tests/worker/worker_test_util.h"
#include "worker/cpu_worker.h"
#include "worker/rendezvous_store.h"
#if defined(FOLIO_HAVE_CUDA_WORKER)
#include "worker/cuda_worker.h"
#endif

extern char** environ;

namespace folio {
namespace {

const std::string kDemo = std::string(FOLIO_SOURCE_DIR) + "/models/folio-demo";
constexpr int64_t kKvBytes = int64_t{8} << 20;
constexpr int64_t kSwapBytes = int64_t{2} << 20;

std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

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

std::shared_ptr<grpc::Channel> Channel(int port) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxWorkerMessageBytes);
  args.SetMaxSendMessageSize(kMaxWorkerMessageBytes);
  return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials(), args);
}

// Greedy tokens of the in-process worker (TP = 1) with the same pools.
std::vector<std::vector<TokenId>> Reference(const std::vector<testing::Prompt>& prompts,
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
  WorkerService service(options);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = v1::Worker::NewStub(Channel(port));

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
                          v1::InitializeResponse* resp, v1::DType dtype = v1::DTYPE_UNSPECIFIED) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(60));
  v1::InitializeRequest req;
  req.set_model_path(kDemo);
  req.set_device(device);
  req.set_dtype(dtype);
  req.set_kv_cache_bytes(kKvBytes);
  return stub.Initialize(&ctx, req, resp);
}

TEST(WorkerServiceTest, CudaWithoutADeviceFailsClearlyAndCpuStillWorks) {
  if (!CudaMustFail()) GTEST_SKIP() << "this machine has a CUDA device";
  WorkerService::Options options;
#if defined(FOLIO_HAVE_CUDA_WORKER)
  options.cuda_loader = LoadCudaWorker;  // as folio-worker sets it
#endif
  WorkerService service(options);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = v1::Worker::NewStub(Channel(port));

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

// ---- Initialize again: the scheduler rebuilding the group after a rank
// failed cancels every Step stream and initializes every rank again, with a
// new rendezvous prefix. The ranks here are WorkerServices in this process
// (shared-memory collectives between them).

// A WorkerService behind a gRPC server of its own.
struct InProcessWorker {
  explicit InProcessWorker(const WorkerService::Options& options) : service(options) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    if (server != nullptr) stub = v1::Worker::NewStub(Channel(port));
  }
  ~InProcessWorker() {
    if (server != nullptr) server->Shutdown(In(5));
  }
  WorkerService service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::Worker::Stub> stub;
};

using Workers = std::vector<std::unique_ptr<InProcessWorker>>;

Workers StartWorkers(int world, absl::Duration collective_timeout,
                     WorkerService::Options::Collectives collectives =
                         WorkerService::Options::Collectives::kAuto) {
  WorkerService::Options options;
  options.collective_timeout = collective_timeout;
  options.collectives = collectives;
  Workers workers;
  for (int r = 0; r < world; ++r) {
    workers.push_back(std::make_unique<InProcessWorker>(options));
    EXPECT_NE(workers.back()->stub, nullptr);
  }
  return workers;
}

grpc::Status InitializeRank(Workers& workers, int rank, const std::string& rendezvous,
                            const std::string& prefix, v1::InitializeResponse* resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(120));
  v1::InitializeRequest req;
  req.set_model_path(kDemo);
  req.set_rank(rank);
  req.set_world_size(static_cast<uint32_t>(workers.size()));
  req.set_kv_cache_bytes(kKvBytes);
  req.set_swap_space_bytes(kSwapBytes);
  req.set_rendezvous_address(rendezvous);
  req.set_rendezvous_prefix(prefix);
  return workers[rank]->stub->Initialize(&ctx, req, resp);
}

// Initialize on every rank at once (it returns once all have joined).
std::vector<grpc::Status> InitializeAll(Workers& workers, const std::string& rendezvous,
                                        const std::string& prefix,
                                        std::vector<v1::InitializeResponse>* responses) {
  std::vector<grpc::Status> status(workers.size());
  responses->assign(workers.size(), {});
  std::vector<std::thread> threads;
  for (size_t r = 0; r < workers.size(); ++r) {
    threads.emplace_back([&, r] {
      status[r] = InitializeRank(workers, int(r), rendezvous, prefix, &(*responses)[r]);
    });
  }
  for (auto& t : threads) t.join();
  return status;
}

struct Blocks {
  uint32_t device = UINT32_MAX;
  uint32_t host = UINT32_MAX;
};

// The scheduler's choice: the smallest counts any rank reported, on every rank.
absl::StatusOr<Blocks> AllocateAll(Workers& workers,
                                   const std::vector<v1::InitializeResponse>& init) {
  Blocks blocks;
  for (const v1::InitializeResponse& r : init) {
    blocks.device = std::min(blocks.device, r.num_device_blocks());
    blocks.host = std::min(blocks.host, r.num_host_blocks());
  }
  for (auto& w : workers) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(60));
    v1::AllocateCacheRequest req;
    req.set_num_device_blocks(blocks.device);
    req.set_num_host_blocks(blocks.host);
    v1::AllocateCacheResponse resp;
    grpc::Status s = w->stub->AllocateCache(&ctx, req, &resp);
    if (!s.ok()) return absl::Status(absl::StatusCode(s.error_code()), s.error_message());
  }
  return blocks;
}

// One Step stream per rank.
class StepStreams {
 public:
  explicit StepStreams(Workers& workers) {
    for (auto& w : workers) {
      ctx_.push_back(std::make_unique<grpc::ClientContext>());
      ctx_.back()->set_deadline(In(300));
      streams_.push_back(w->stub->Step(ctx_.back().get()));
    }
  }
  ~StepStreams() { Cancel(); }

  // Greedy tokens of `prompts` through a real Scheduler, every plan sent to
  // every rank, rank 0's samples.
  absl::StatusOr<std::vector<std::vector<TokenId>>> Greedy(
      const std::vector<testing::Prompt>& prompts, Blocks blocks) {
    SchedulerConfig sc;
    sc.num_device_blocks = static_cast<int32_t>(blocks.device);
    sc.num_host_blocks = static_cast<int32_t>(blocks.host);
    sc.max_num_batched_tokens = 64;
    sc.max_model_len = 512;
    absl::StatusOr<std::unique_ptr<Scheduler>> scheduler = Scheduler::Create(sc);
    if (!scheduler.ok()) return scheduler.status();
    return testing::RunGreedy(**scheduler, prompts,
                              [&](const StepPlan& plan) -> absl::StatusOr<StepResult> {
      v1::StepPlan proto;
      ToProto(plan, &proto);
      for (auto& stream : streams_) {
        if (!stream->Write(proto)) return absl::UnavailableError("Step stream: Write failed");
      }
      StepResult out;
      for (size_t r = 0; r < streams_.size(); ++r) {
        v1::StepResult result;
        if (!streams_[r]->Read(&result)) {
          return absl::UnavailableError(absl::StrCat("rank ", r, "'s Step stream ended"));
        }
        if (absl::Status s = FromProto(result.status()); !s.ok()) return s;
        if (r == 0) {
          if (absl::Status s = FromProto(result, &out); !s.ok()) return s;
        }
      }
      return out;
    });
  }

  bool Send(int rank, const v1::StepPlan& plan) { return streams_[rank]->Write(plan); }
  // Rank `rank` answers one plan with this status code.
  int StepCode(int rank, const v1::StepPlan& plan) {
    v1::StepResult result;
    if (!Send(rank, plan) || !streams_[rank]->Read(&result)) return -1;
    return result.status().code();
  }

  // What the scheduler does when a rank failed.
  void Cancel() {
    if (closed_) return;
    for (auto& ctx : ctx_) ctx->TryCancel();
    for (auto& stream : streams_) stream->Finish();  // CANCELLED
    closed_ = true;
  }
  // Ends the streams as a scheduler that stops stepping does.
  bool Close() {
    bool ok = true;
    for (auto& stream : streams_) {
      stream->WritesDone();
      ok = stream->Finish().ok() && ok;
    }
    closed_ = true;
    return ok;
  }

 private:
  std::vector<std::unique_ptr<grpc::ClientContext>> ctx_;
  std::vector<std::unique_ptr<grpc::ClientReaderWriter<v1::StepPlan, v1::StepResult>>> streams_;
  bool closed_ = false;
};

void ExpectAllOk(const std::vector<grpc::Status>& status) {
  for (size_t r = 0; r < status.size(); ++r) {
    EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r].error_message();
  }
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Waits until `rank`'s Initialize under `prefix` has published its first key
// in the rendezvous store (it then waits for its peers'): its host identity
// (kAuto), or its Gloo address (kGloo; Gloo's own key "rank_<r>").
absl::Status WaitForRankToJoin(const std::string& rendezvous, const std::string& prefix, int rank,
                               WorkerService::Options::Collectives collectives) {
  const bool gloo = collectives == WorkerService::Options::Collectives::kGloo;
  RendezvousStore::Options so;
  so.address = rendezvous;
  so.prefix = prefix + (gloo ? "/gloo/" : "/host/");
  absl::StatusOr<std::unique_ptr<RendezvousStore>> store = RendezvousStore::Create(so);
  if (!store.ok()) return store.status();
  return (*store)->Wait({(gloo ? "rank_" : "") + std::to_string(rank)}, absl::Seconds(30));
}

using WorkerServiceAgainTest = WorkerProcessesTest;  // for its rendezvous service

TEST_F(WorkerServiceAgainTest, ReadyWorkerInitializedAgainAnswersTheSameAndSteps) {
  Workers workers = StartWorkers(1, absl::Seconds(30));
  const auto prompts = testing::MixedPrompts(2040, 6, 5);
  std::vector<v1::InitializeResponse> first, second;
  ExpectAllOk(InitializeAll(workers, rendezvous_address_, "again-1/a", &first));
  absl::StatusOr<Blocks> blocks = AllocateAll(workers, first);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  StepStreams streams(workers);
  auto before = streams.Greedy(prompts, *blocks);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(*before, Reference(prompts, int32_t(blocks->device), int32_t(blocks->host)));

  streams.Cancel();
  ExpectAllOk(InitializeAll(workers, rendezvous_address_, "again-1/b", &second));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(first[0], second[0]))
      << first[0].DebugString() << " vs " << second[0].DebugString();
  absl::StatusOr<Blocks> again = AllocateAll(workers, second);
  ASSERT_TRUE(again.ok()) << again.status();
  StepStreams new_streams(workers);
  auto after = new_streams.Greedy(prompts, *again);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(*after, *before);
  EXPECT_TRUE(new_streams.Close());
}

// A Step stream nobody cancels keeps a second Initialize waiting: it gives
// up after collective_timeout and leaves the worker serving as before.
TEST_F(WorkerServiceAgainTest, InitializeAgainGivesUpWhileTheStepStreamStaysOpen) {
  Workers workers = StartWorkers(1, absl::Seconds(1));
  std::vector<v1::InitializeResponse> init;
  ExpectAllOk(InitializeAll(workers, rendezvous_address_, "again-2/a", &init));
  ASSERT_TRUE(AllocateAll(workers, init).ok());
  StepStreams streams(workers);
  v1::StepPlan empty;
  empty.set_step_id(1);
  ASSERT_EQ(streams.StepCode(0, empty), 0);

  const auto start = std::chrono::steady_clock::now();
  v1::InitializeResponse resp;
  grpc::Status s = InitializeRank(workers, 0, rendezvous_address_, "again-2/b", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_NE(s.error_message().find("the previous step is still running"), std::string::npos)
      << s.error_message();
  EXPECT_GE(SecondsSince(start), 0.9);
  // Still ready: the stream serves, the cache stays.
  empty.set_step_id(2);
  EXPECT_EQ(streams.StepCode(0, empty), 0);
  EXPECT_FALSE(AllocateAll(workers, init).ok());
  EXPECT_TRUE(streams.Close());
  ExpectAllOk(InitializeAll(workers, rendezvous_address_, "again-2/c", &init));
}

// Two ranks: a second Initialize while the first runs is refused; rank 0
// stuck in a step whose peer never comes (only rank 0 got the plan) is
// freed by the new Initialize, which aborts the group long before the
// collective timeout; under a new prefix both ranks step together again.
// For both kinds of collectives: shared memory (chosen by kAuto, as on one
// host) and Gloo (TCP) abort alike.
void ExpectInitializeAgainAbortsAStepWaitingForAHungPeer(
    const std::string& rendezvous_address, WorkerService::Options::Collectives collectives,
    const std::string& prefix) {
  constexpr absl::Duration kCollectiveTimeout = absl::Seconds(30);
  Workers workers = StartWorkers(2, kCollectiveTimeout, collectives);
  std::vector<v1::InitializeResponse> init(2);
  grpc::Status rank0;
  std::thread first([&] {
    rank0 = InitializeRank(workers, 0, rendezvous_address, prefix + "/a", &init[0]);
  });
  EXPECT_TRUE(WaitForRankToJoin(rendezvous_address, prefix + "/a", 0, collectives).ok());  // no ASSERT: join first
  v1::InitializeResponse refused;
  grpc::Status s = InitializeRank(workers, 0, rendezvous_address, prefix + "/a", &refused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("running already"), std::string::npos) << s.error_message();
  grpc::Status rank1 = InitializeRank(workers, 1, rendezvous_address, prefix + "/a", &init[1]);
  first.join();
  ExpectAllOk({rank0, rank1});
  absl::StatusOr<Blocks> blocks = AllocateAll(workers, init);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  const auto prompts = testing::MixedPrompts(2040, 6, 7);
  StepStreams streams(workers);
  auto before = streams.Greedy(prompts, *blocks);
  ASSERT_TRUE(before.ok()) << before.status();

  // A prefill for rank 0 only: its all-reduce waits for rank 1, which never
  // comes (a hung peer). Give it a moment to get there.
  SchedulerConfig sc;
  sc.num_device_blocks = static_cast<int32_t>(blocks->device);
  sc.max_model_len = 512;
  auto scheduler = Scheduler::Create(sc);
  ASSERT_TRUE(scheduler.ok());
  RequestSpec spec;
  spec.id = 99;
  spec.prompt = prompts[0].tokens;
  ASSERT_TRUE((*scheduler)->AddRequest(spec).ok());
  v1::StepPlan lone;
  ToProto((*scheduler)->Schedule(), &lone);
  ASSERT_GT(lone.num_scheduled_tokens(), 0u);
  ASSERT_TRUE(streams.Send(0, lone));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  // Rank 0 first, so that only its Abort can free it (rank 1 leaving the
  // old group would break it too): it gets to the new group's rendezvous
  // long before the blocked step's timeout.
  streams.Cancel();
  const auto start = std::chrono::steady_clock::now();
  std::vector<v1::InitializeResponse> again(2);
  first = std::thread([&] {
    rank0 = InitializeRank(workers, 0, rendezvous_address, prefix + "/b", &again[0]);
  });
  EXPECT_TRUE(WaitForRankToJoin(rendezvous_address, prefix + "/b", 0, collectives).ok());  // no ASSERT: join first
  EXPECT_LT(SecondsSince(start), absl::ToDoubleSeconds(kCollectiveTimeout) / 3)
      << "the new Initialize waited for the blocked step's timeout";
  rank1 = InitializeRank(workers, 1, rendezvous_address, prefix + "/b", &again[1]);
  first.join();
  ExpectAllOk({rank0, rank1});
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(init[r], again[r]))
        << "rank " << r;
  }
  absl::StatusOr<Blocks> new_blocks = AllocateAll(workers, again);
  ASSERT_TRUE(new_blocks.ok()) << new_blocks.status();
  StepStreams new_streams(workers);
  auto after = new_streams.Greedy(prompts, *new_blocks);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(*after, *before);
  EXPECT_TRUE(new_streams.Close());
}

TEST_F(WorkerServiceAgainTest, InitializeAgainAbortsAStepWaitingForAHungPeerOverSharedMemory) {
  ExpectInitializeAgainAbortsAStepWaitingForAHungPeer(
      rendezvous_address_, WorkerService::Options::Collectives::kAuto, "again-3");
}

TEST_F(WorkerServiceAgainTest, InitializeAgainAbortsAStepWaitingForAHungPeerOverGloo) {
  ExpectInitializeAgainAbortsAStepWaitingForAHungPeer(
      rendezvous_address_, WorkerService::Options::Collectives::kGloo, "again-4");
}

}  // namespace
}  // namespace folio
