// folio-worker's Prometheus metrics: an in-process WorkerService driven
// through Initialize -> AllocateCache -> Step by a real Scheduler (swap
// preemption in a tiny pool) on the demo model, scraped over HTTP: one step
// and one all-reduce observation per step, swap bytes = blocks swapped x
// block bytes, labels model and rank; the CPU worker's steps by kind and
// their time by part of the forward pass. And the folio-worker binary's
// --metrics-port flag.

#include "worker/worker_metrics.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <prometheus/registry.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/metrics_server.h"
#include "common/plan_proto.h"
#include "tests/common/metrics_scrape.h"
#include "tests/worker/worker_test_util.h"
#include "worker/worker_service.h"

extern char** environ;

namespace folio {
namespace {

const std::string kDemo = std::string(FOLIO_SOURCE_DIR) + "/models/folio-demo";

std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

TEST(WorkerMetricsTest, StepsAllReducesAndSwapBytesAreCounted) {
  auto registry = std::make_shared<prometheus::Registry>();
  WorkerMetrics metrics(*registry);
  absl::StatusOr<std::unique_ptr<MetricsServer>> endpoint =
      MetricsServer::Start("127.0.0.1", 0, registry);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  const int metrics_port = (*endpoint)->port();
  // Before Initialize the rank has no model: no folio series yet.
  EXPECT_TRUE(testing::Scrape(metrics_port).Find("folio_worker_step_seconds_count").empty());

  WorkerService::Options options;
  options.metrics = &metrics;
  WorkerService service(options);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = v1::Worker::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));

  constexpr uint32_t kDeviceBlocks = 6, kHostBlocks = 32;
  v1::InitializeResponse init;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(60));
    v1::InitializeRequest req;
    req.set_model_path(kDemo + "/");
    // The scheduler's --model-name labels the series (without it, the
    // directory's name: metrics_prometheus_test covers that).
    req.set_model_name("demo-served");
    req.set_block_size(16);
    req.set_kv_cache_bytes(int64_t{8} << 20);
    grpc::Status s = stub->Initialize(&ctx, req, &init);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(60));
    v1::AllocateCacheRequest req;
    req.set_num_device_blocks(kDeviceBlocks);
    req.set_num_host_blocks(kHostBlocks);
    v1::AllocateCacheResponse resp;
    grpc::Status s = stub->AllocateCache(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  SchedulerConfig sc;
  sc.num_device_blocks = kDeviceBlocks;
  sc.num_host_blocks = kHostBlocks;
  sc.max_num_batched_tokens = 64;
  sc.max_model_len = 512;
  sc.preemption_mode = PreemptionMode::kSwap;
  auto scheduler = Scheduler::Create(sc);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  grpc::ClientContext step_ctx;
  step_ctx.set_deadline(In(300));
  auto stream = stub->Step(&step_ctx);
  int64_t steps = 0, decode_steps = 0, swapped_in = 0, swapped_out = 0;
  auto tokens = testing::RunGreedy(**scheduler, testing::MixedPrompts(2040, 8, 5),
                                   [&](const StepPlan& plan) -> absl::StatusOr<StepResult> {
    v1::StepPlan proto;
    ToProto(plan, &proto);
    if (!stream->Write(proto)) return absl::UnavailableError("write");
    v1::StepResult result;
    if (!stream->Read(&result)) return absl::UnavailableError("read");
    ++steps;
    // The worker's own test: one token for every sequence in the batch.
    if (plan.num_scheduled_tokens == static_cast<int32_t>(plan.scheduled.size())) ++decode_steps;
    swapped_in += static_cast<int64_t>(plan.swap_in.size());
    swapped_out += static_cast<int64_t>(plan.swap_out.size());
    StepResult out;
    if (absl::Status s = FromProto(result, &out); !s.ok()) return s;
    return out;
  });
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  stream->WritesDone();
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_GT(swapped_out, 0) << "the pool was meant to be too small";
  EXPECT_EQ(swapped_in, swapped_out);

  const testing::Exposition e = testing::Scrape(metrics_port);
  const std::map<std::string, std::string> rank0 = {{"model", "demo-served"}, {"rank", "0"}};
  EXPECT_EQ(e.types.at("folio_worker_step_seconds"), "histogram");
  EXPECT_EQ(e.types.at("folio_worker_allreduce_seconds"), "histogram");
  EXPECT_EQ(e.types.at("folio_worker_swap_bytes_total"), "counter");
  EXPECT_EQ(e.Value("folio_worker_step_seconds_count", rank0), steps);
  EXPECT_GT(e.Value("folio_worker_step_seconds_sum", rank0).value_or(0), 0);
  EXPECT_EQ(e.Value("folio_worker_allreduce_seconds_count", rank0), steps);
  EXPECT_EQ(e.Value("folio_worker_allreduce_seconds_sum", rank0), 0) << "one rank: no collectives";
  std::map<std::string, std::string> in = rank0, out = rank0;
  in["direction"] = "in";
  out["direction"] = "out";
  const double block_bytes = static_cast<double>(init.block_bytes());
  EXPECT_EQ(e.Value("folio_worker_swap_bytes_total", in), block_bytes * swapped_in);
  EXPECT_EQ(e.Value("folio_worker_swap_bytes_total", out), block_bytes * swapped_out);

  // Steps by kind, and their time by part: every part of the forward pass
  // has a series; the parts a one-rank step runs took time, the all-reduce
  // none; together they fit in the steps' own time.
  EXPECT_EQ(e.types.at("folio_worker_steps_total"), "counter");
  EXPECT_EQ(e.types.at("folio_worker_step_part_seconds_total"), "counter");
  std::map<std::string, std::string> decode = rank0, prompt = rank0;
  decode["kind"] = "decode";
  prompt["kind"] = "prompt";
  ASSERT_GT(decode_steps, 0);
  ASSERT_LT(decode_steps, steps);
  EXPECT_EQ(e.Value("folio_worker_steps_total", decode), decode_steps);
  EXPECT_EQ(e.Value("folio_worker_steps_total", prompt), steps - decode_steps);
  double parts_seconds = 0;
  for (const auto& kind : {decode, prompt}) {
    EXPECT_EQ(e.Find("folio_worker_step_part_seconds_total", kind).size(),
              static_cast<size_t>(StepPart::kCount));
    for (const char* part : {"plan", "qkv_gemm", "attention", "mlp_gemms", "lm_head", "sampling"}) {
      std::map<std::string, std::string> labels = kind;
      labels["part"] = part;
      EXPECT_GT(e.Value("folio_worker_step_part_seconds_total", labels).value_or(0), 0)
          << kind.at("kind") << " " << part;
    }
    std::map<std::string, std::string> allreduce = kind;
    allreduce["part"] = "all_reduce";
    EXPECT_EQ(e.Value("folio_worker_step_part_seconds_total", allreduce), 0);
    for (const testing::Sample& sample : e.Find("folio_worker_step_part_seconds_total", kind)) {
      parts_seconds += sample.value;
    }
  }
  EXPECT_LE(parts_seconds, e.Value("folio_worker_step_seconds_sum", rank0).value_or(0));
  server->Shutdown(In(5));
}

// folio-worker with flags; returns its exit code once it ended by itself
// within `seconds`, or -1 (after SIGTERM) when it was still running.
class WorkerBinary {
 public:
  explicit WorkerBinary(std::vector<std::string> args) {
    args.insert(args.begin(), FOLIO_WORKER_BIN);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    if (posix_spawn(&pid_, FOLIO_WORKER_BIN, &actions, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~WorkerBinary() { Stop(); }
  bool started() const { return pid_ > 0; }
  // The exit code if the process ended within `seconds`, else -1.
  int WaitExit(int seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      ::poll(nullptr, 0, 20);
    }
    return -1;
  }
  int Stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int code = WaitExit(30);
    if (code < 0 && pid_ > 0) {
      kill(pid_, SIGKILL);
      code = WaitExit(30);
    }
    return code;
  }

 private:
  pid_t pid_ = -1;
};

TEST(WorkerMetricsTest, TheBinaryServesMetricsOnItsPortAndFailsOnATakenOne) {
  const int port = testing::FreePort();
  ASSERT_GT(port, 0);
  WorkerBinary worker({"--port", "0", "--metrics-port", std::to_string(port)});
  ASSERT_TRUE(worker.started());
  // Wait (with a deadline) for the endpoint to answer.
  std::optional<std::string> body;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!body.has_value() && std::chrono::steady_clock::now() < deadline) {
    body = testing::HttpGet(port, "/metrics", 1000);
    if (!body.has_value()) ::poll(nullptr, 0, 50);
  }
  ASSERT_TRUE(body.has_value()) << "folio-worker never served /metrics on " << port;

  // A second worker asked for the same port explicitly refuses to start.
  WorkerBinary clash({"--port", "0", "--metrics-port", std::to_string(port)});
  ASSERT_TRUE(clash.started());
  EXPECT_EQ(clash.WaitExit(30), 1);
  EXPECT_EQ(worker.Stop(), 0);
}

}  // namespace
}  // namespace folio
