// A real Prometheus server (Debian package `prometheus`, started here on
// 127.0.0.1 with a temporary storage dir) scrapes a local cluster — one
// folio-worker and folio-scheduler processes on the demo model — while it
// serves a short workload, and its HTTP API answers for folio's series: the
// KV block total, the finished requests, the preemptions the scheduler
// counted, the worker's steps. Skipped when the prometheus binary is absent
// (deploy/install-deps.sh installs it).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "folio/v1/generation.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "tests/common/metrics_scrape.h"

extern char** environ;

namespace folio {
namespace {

const std::string kDemo = std::string(FOLIO_SOURCE_DIR) + "/models/folio-demo";
constexpr char kPrometheus[] = "/usr/bin/prometheus";

// A child process with its output in `log`; SIGTERM, then SIGKILL, at the end.
class Child {
 public:
  Child(std::vector<std::string> argv, const std::string& log) {
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Child() { Stop(); }
  bool running() {
    if (pid_ <= 0) return false;
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    return true;
  }
  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 600 && running(); ++i) ::poll(nullptr, 0, 50);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

 private:
  pid_t pid_ = -1;
};

// The end of each child's log, for failure messages (the dir is removed).
std::string Logs(const std::filesystem::path& dir) {
  std::string out;
  for (const char* name : {"worker.log", "scheduler.log", "prometheus.log"}) {
    std::ifstream in(dir / name);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    out += "\n--- " + std::string(name) + " (end) ---\n" +
           text.substr(text.size() > 1500 ? text.size() - 1500 : 0);
  }
  return out;
}

// Polls `done` every 100 ms until it holds or `seconds` pass.
bool WaitFor(int seconds, const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    ::poll(nullptr, 0, 100);
  }
  return done();
}

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '_' || c == '-' || c == '.') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

// An instant PromQL query against Prometheus' HTTP API: the sample values
// of the result vector, or nullopt when the query failed.
std::optional<std::vector<double>> Query(int port, const std::string& promql) {
  std::optional<std::string> body = testing::HttpGet(port, "/api/v1/query?query=" + UrlEncode(promql));
  if (!body.has_value()) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(*body, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") return std::nullopt;
  std::vector<double> values;
  for (const auto& r : j["data"]["result"]) values.push_back(std::stod(r["value"][1].get<std::string>()));
  return values;
}

// One value, or nullopt when the result is not exactly one sample.
std::optional<double> QueryOne(int port, const std::string& promql) {
  std::optional<std::vector<double>> v = Query(port, promql);
  if (!v.has_value() || v->size() != 1) return std::nullopt;
  return v->front();
}

TEST(MetricsPrometheusTest, PrometheusScrapesTheSchedulerAndTheWorker) {
  if (access(kPrometheus, X_OK) != 0) {
    GTEST_SKIP() << kPrometheus << " is not installed (Debian package `prometheus`, "
                 << "installed by deploy/install-deps.sh): nothing to scrape with";
  }
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("folio_prometheus_test_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "tsdb");
  // Removed at the end, failed or not (declared first: destroyed after the children).
  struct RemoveDir {
    std::filesystem::path path;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } remove_dir{dir};
  const int worker_port = testing::FreePort(), worker_metrics = testing::FreePort();
  const int scheduler_port = testing::FreePort(), scheduler_metrics = testing::FreePort();
  const int prometheus_port = testing::FreePort();

  Child worker({FOLIO_WORKER_BIN, "--port", std::to_string(worker_port), "--metrics-port",
                std::to_string(worker_metrics)},
               (dir / "worker.log").string());
  // 1 MiB of KV cache: 16 blocks of 16 tokens, too few for the workload below.
  Child scheduler({FOLIO_SCHEDULER_BIN, "--model", kDemo, "--port", std::to_string(scheduler_port),
                   "--workers", "127.0.0.1:" + std::to_string(worker_port), "--kv-cache-mb", "1",
                   "--metrics-port", std::to_string(scheduler_metrics)},
                  (dir / "scheduler.log").string());
  {
    std::ofstream config(dir / "prometheus.yml");
    config << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
           << "scrape_configs:\n"
           << "  - job_name: folio-scheduler\n    static_configs:\n      - targets: ['127.0.0.1:"
           << scheduler_metrics << "']\n"
           << "  - job_name: folio-worker\n    static_configs:\n      - targets: ['127.0.0.1:"
           << worker_metrics << "']\n";
  }
  Child prometheus({kPrometheus, "--config.file=" + (dir / "prometheus.yml").string(),
                    "--storage.tsdb.path=" + (dir / "tsdb").string(),
                    "--web.listen-address=127.0.0.1:" + std::to_string(prometheus_port)},
                   (dir / "prometheus.log").string());

  // The scheduler serves once its warm-up request went through.
  auto stub = v1::Generation::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(scheduler_port), grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(WaitFor(120, [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    v1::ModelInfo info;
    return stub->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info).ok();
  })) << "folio-scheduler did not come up; " << Logs(dir);

  // A short workload: 8 concurrent greedy requests of 48 tokens each.
  constexpr int kRequests = 8, kTokens = 48;
  std::vector<std::thread> clients;
  std::vector<int> finished(kRequests, 0);
  for (int i = 0; i < kRequests; ++i) {
    clients.emplace_back([&, i] {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
      v1::GenerateRequest r;
      r.set_text("And God said, let there be light " + std::to_string(i));
      r.mutable_sampling_params()->set_temperature(0);
      r.mutable_sampling_params()->set_max_tokens(kTokens);
      r.mutable_sampling_params()->set_ignore_eos(true);
      auto reader = stub->Generate(&ctx, r);
      v1::GenerateResponse resp;
      while (reader->Read(&resp)) {
        if (resp.has_finished()) finished[i] = 1;
      }
      reader->Finish();
    });
  }
  for (auto& t : clients) t.join();
  for (int i = 0; i < kRequests; ++i) EXPECT_EQ(finished[i], 1) << "request " << i;

  // What the endpoints say now (the warm-up request counts too) ...
  const testing::Exposition direct = testing::Scrape(scheduler_metrics);
  const std::optional<double> blocks = direct.Value("folio_kv_cache_blocks_total", {{"pool", "device"}});
  ASSERT_TRUE(blocks.has_value());
  EXPECT_EQ(*blocks, 16);
  const std::optional<double> preemptions = direct.Value("folio_preemptions_total", {{"mode", "recompute"}});
  ASSERT_TRUE(preemptions.has_value());
  EXPECT_GT(*preemptions, 0) << "16 blocks were meant to be too few";
  EXPECT_EQ(direct.Value("folio_request_success_total", {{"finish_reason", "length"}}), kRequests + 1);
  // Every scheduler step ran one step on the worker.
  const std::optional<double> steps = direct.Value("folio_step_duration_seconds_count");
  ASSERT_TRUE(steps.has_value());
  EXPECT_GE(*steps, kTokens);
  const std::optional<double> worker_steps =
      testing::Scrape(worker_metrics)
          .Value("folio_worker_step_seconds_count", {{"rank", "0"}, {"model", "folio-demo"}});
  EXPECT_EQ(worker_steps, steps);

  // ... is what Prometheus stores, once it scraped both after the workload.
  ASSERT_TRUE(WaitFor(60, [&] {
    return QueryOne(prometheus_port, "folio_request_success_total{finish_reason=\"length\"}") ==
               std::optional<double>(kRequests + 1) &&
           QueryOne(prometheus_port, "folio_worker_step_seconds_count{rank=\"0\",model=\"folio-demo\"}") ==
               worker_steps;
  })) << "Prometheus never saw the end of the workload; " << Logs(dir);
  EXPECT_EQ(QueryOne(prometheus_port, "folio_kv_cache_blocks_total{pool=\"device\",model=\"folio-demo\"}"),
            std::optional<double>(16));
  EXPECT_EQ(QueryOne(prometheus_port, "folio_kv_cache_blocks_used{pool=\"device\"}"),
            std::optional<double>(0));
  EXPECT_EQ(QueryOne(prometheus_port, "folio_preemptions_total{mode=\"recompute\"}"), preemptions);
  EXPECT_EQ(QueryOne(prometheus_port, "up{job=\"folio-scheduler\"}"), std::optional<double>(1));
  EXPECT_EQ(QueryOne(prometheus_port, "up{job=\"folio-worker\"}"), std::optional<double>(1));
  // A dashboard-style expression: p99 time to first token, a finite number.
  const std::optional<double> p99 = QueryOne(
      prometheus_port,
      "histogram_quantile(0.99, sum by (le) (folio_time_to_first_token_seconds_bucket))");
  ASSERT_TRUE(p99.has_value());
  EXPECT_GT(*p99, 0);

  prometheus.Stop();
  scheduler.Stop();
  worker.Stop();
}

}  // namespace
}  // namespace folio
