// A real Prometheus server (Debian package `prometheus`, started here on
// 127.0.0.1 with a temporary storage dir) scrapes a local cluster — one
// folio-worker and folio-scheduler processes on the demo model — while it
// serves a short workload, and its HTTP API answers for folio's series: the
// KV block total, the finished requests, the preemptions the scheduler
// counted, the worker's steps; the device KV usage series moves over the run;
// every PromQL expression of deploy/grafana/folio-dashboard.json (with the
// Grafana variables substituted) evaluates, the core panels with data; and
// Prometheus loads deploy/prometheus/folio-rules.yml and evaluates every
// rule without error. Skipped when the prometheus binary is absent
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
const std::string kDashboard = std::string(FOLIO_SOURCE_DIR) + "/deploy/grafana/folio-dashboard.json";
const std::string kRules = std::string(FOLIO_SOURCE_DIR) + "/deploy/prometheus/folio-rules.yml";
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

// A GET against Prometheus' HTTP API, its JSON answer; nullopt when the
// request failed (Prometheus answers 4xx to a query it cannot parse or run)
// or the answer is not {"status": "success", ...}.
std::optional<nlohmann::json> Api(int port, const std::string& path) {
  std::optional<std::string> body = testing::HttpGet(port, path);
  if (!body.has_value()) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(*body, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") return std::nullopt;
  return j;
}

// An instant PromQL query against Prometheus' HTTP API: the sample values
// of the result vector, or nullopt when the query failed.
std::optional<std::vector<double>> Query(int port, const std::string& promql) {
  std::optional<nlohmann::json> j = Api(port, "/api/v1/query?query=" + UrlEncode(promql));
  if (!j.has_value()) return std::nullopt;
  if ((*j)["data"].value("resultType", "") != "vector") return std::nullopt;
  std::vector<double> values;
  for (const auto& r : (*j)["data"]["result"]) values.push_back(std::stod(r["value"][1].get<std::string>()));
  return values;
}

// One value, or nullopt when the result is not exactly one sample.
std::optional<double> QueryOne(int port, const std::string& promql) {
  std::optional<std::vector<double>> v = Query(port, promql);
  if (!v.has_value() || v->size() != 1) return std::nullopt;
  return v->front();
}

void ReplaceAll(std::string& s, const std::string& from, const std::string& to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
}

// A dashboard panel's query the way Grafana sends it: the variables replaced
// (${model} / $model by the model name, the interval variables by fixed
// windows; $datasource only appears outside the expressions).
std::string Substitute(std::string expr, const std::string& model) {
  for (const char* v : {"${model}", "$model"}) ReplaceAll(expr, v, model);
  for (const char* v : {"${__rate_interval}", "$__rate_interval", "${__range}", "$__range"}) {
    ReplaceAll(expr, v, "1m");
  }
  for (const char* v : {"${__interval}", "$__interval"}) ReplaceAll(expr, v, "15s");
  return expr;
}

struct PanelQuery {
  std::string title, expr;
};

// Every targets[].expr of the dashboard, rows' nested panels included.
void CollectQueries(const nlohmann::json& panels, std::vector<PanelQuery>& out) {
  for (const auto& p : panels) {
    for (const auto& t : p.value("targets", nlohmann::json::array())) {
      if (t.contains("expr")) out.push_back({p.value("title", ""), t["expr"].get<std::string>()});
    }
    if (p.contains("panels")) CollectQueries(p["panels"], out);
  }
}

// The number of rules in a Prometheus rules file: lines that start a list item
// with `record:` or `alert:` (the file's layout: one `- record:` / `- alert:`
// per rule; there is no YAML parser in the C++ tests).
int CountRules(const std::string& path) {
  std::ifstream in(path);
  int rules = 0;
  for (std::string line; std::getline(in, line);) {
    const size_t first = line.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    if (line.compare(first, 9, "- record:") == 0 || line.compare(first, 8, "- alert:") == 0) ++rules;
  }
  return rules;
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
  // 12 device blocks of 16 tokens, too few for the workload below: it preempts
  // (by recomputation).
  Child scheduler({FOLIO_SCHEDULER_BIN, "--model", kDemo, "--port", std::to_string(scheduler_port),
                   "--workers", "127.0.0.1:" + std::to_string(worker_port), "--num-device-blocks",
                   "12", "--preemption-mode", "recompute", "--metrics-port",
                   std::to_string(scheduler_metrics)},
                  (dir / "scheduler.log").string());
  {
    std::ofstream config(dir / "prometheus.yml");
    // Scraped 10 times a second, so that the short workload shows in the
    // series; the rules of deploy/ evaluated 4 times a second.
    config << "global:\n  scrape_interval: 100ms\n  evaluation_interval: 250ms\n"
           << "rule_files:\n  - '" << kRules << "'\n"
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
  // Prometheus scrapes both before the workload starts, so that it sees it.
  ASSERT_TRUE(WaitFor(60, [&] {
    return QueryOne(prometheus_port, "up{job=\"folio-scheduler\"}") == std::optional<double>(1) &&
           QueryOne(prometheus_port, "up{job=\"folio-worker\"}") == std::optional<double>(1);
  })) << "Prometheus did not scrape the cluster; " << Logs(dir);

  // A short workload: waves of 8 concurrent greedy requests of 48 tokens
  // each (a wave takes about half a second), until Prometheus has scraped the
  // device pool in use at least once; usually the first wave does.
  constexpr int kRequests = 8, kTokens = 48, kMaxWaves = 10;
  const std::string kUsageMax = "max_over_time(folio_kv_cache_usage_ratio{pool=\"device\"}[5m])";
  // One wave; the number of requests that finished.
  const auto wave = [&] {
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
    int done = 0;
    for (int f : finished) done += f;
    return done;
  };
  int waves = 0;
  for (bool seen_in_use = false; !seen_in_use && waves < kMaxWaves;) {
    ASSERT_EQ(wave(), kRequests) << "wave " << waves;
    ++waves;
    const std::optional<double> usage = QueryOne(prometheus_port, kUsageMax);
    seen_in_use = usage.has_value() && *usage > 0;
  }
  const int total_requests = waves * kRequests;

  // What the endpoints say now (the warm-up request counts too) ...
  const testing::Exposition direct = testing::Scrape(scheduler_metrics);
  const std::optional<double> blocks = direct.Value("folio_kv_cache_blocks_total", {{"pool", "device"}});
  ASSERT_TRUE(blocks.has_value());
  EXPECT_EQ(*blocks, 12);
  const std::optional<double> preemptions = direct.Value("folio_preemptions_total", {{"mode", "recompute"}});
  ASSERT_TRUE(preemptions.has_value());
  EXPECT_GT(*preemptions, 0) << "12 blocks were meant to be too few";
  double all_preemptions = 0;
  for (const testing::Sample& s : direct.Find("folio_preemptions_total")) all_preemptions += s.value;
  EXPECT_EQ(direct.Value("folio_request_success_total", {{"finish_reason", "length"}}), total_requests + 1);
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
               std::optional<double>(total_requests + 1) &&
           QueryOne(prometheus_port, "folio_worker_step_seconds_count{rank=\"0\",model=\"folio-demo\"}") ==
               worker_steps;
  })) << "Prometheus never saw the end of the workload; " << Logs(dir);
  EXPECT_EQ(QueryOne(prometheus_port, "folio_kv_cache_blocks_total{pool=\"device\",model=\"folio-demo\"}"),
            std::optional<double>(12));
  EXPECT_EQ(QueryOne(prometheus_port, "folio_kv_cache_blocks_used{pool=\"device\"}"),
            std::optional<double>(0));
  EXPECT_EQ(QueryOne(prometheus_port, "folio_preemptions_total{mode=\"recompute\"}"), preemptions);
  EXPECT_EQ(QueryOne(prometheus_port, "sum(folio_preemptions_total)"), std::optional<double>(all_preemptions));
  // The device KV usage moved: blocks were in use during the workload, none now.
  const std::optional<double> usage_max = QueryOne(prometheus_port, kUsageMax);
  const std::optional<double> usage_min =
      QueryOne(prometheus_port, "min_over_time(folio_kv_cache_usage_ratio{pool=\"device\"}[5m])");
  ASSERT_TRUE(usage_max.has_value() && usage_min.has_value());
  EXPECT_GT(*usage_max, *usage_min) << "folio_kv_cache_usage_ratio{pool=\"device\"} never changed";
  EXPECT_GT(*usage_max, 0) << "Prometheus never saw the device pool in use in " << waves << " waves";
  EXPECT_EQ(*usage_min, 0);
  EXPECT_EQ(QueryOne(prometheus_port, "up{job=\"folio-scheduler\"}"), std::optional<double>(1));
  EXPECT_EQ(QueryOne(prometheus_port, "up{job=\"folio-worker\"}"), std::optional<double>(1));
  // A dashboard-style expression: p99 time to first token, a finite number.
  const std::optional<double> p99 = QueryOne(
      prometheus_port,
      "histogram_quantile(0.99, sum by (le) (folio_time_to_first_token_seconds_bucket))");
  ASSERT_TRUE(p99.has_value());
  EXPECT_GT(*p99, 0);

  // Every query of the dashboard evaluates, with $model set to the model.
  std::ifstream dashboard_file(kDashboard);
  const nlohmann::json dashboard = nlohmann::json::parse(dashboard_file, nullptr, false);
  ASSERT_FALSE(dashboard.is_discarded()) << kDashboard;
  std::vector<PanelQuery> queries;
  CollectQueries(dashboard.value("panels", nlohmann::json::array()), queries);
  ASSERT_GE(queries.size(), 20u);
  std::map<std::string, int> with_data;  // panel title -> queries with a number
  for (const PanelQuery& q : queries) {
    const std::string expr = Substitute(q.expr, "folio-demo");
    EXPECT_EQ(expr.find('$'), std::string::npos) << q.title << ": a variable left in " << expr;
    const std::optional<std::vector<double>> values = Query(prometheus_port, expr);
    EXPECT_TRUE(values.has_value()) << q.title << ": " << expr << " did not evaluate";
    if (values.has_value() && !values->empty() && values->front() == values->front()) ++with_data[q.title];
  }
  // The core panels have data (a number, not NaN) after the workload.
  for (const char* title : {"KV cache usage (device)", "Requests running / waiting", "Token throughput",
                            "Time to first token", "KV cache block usage by pool",
                            "CPU worker decode step by part"}) {
    EXPECT_GT(with_data[title], 0) << "dashboard panel \"" << title << "\" has no data";
  }
  // Throughput over the last minute: the workload generated tokens.
  const std::optional<double> throughput =
      QueryOne(prometheus_port, "sum(rate(folio_generation_tokens_total{model=~\"folio-demo\"}[1m]))");
  ASSERT_TRUE(throughput.has_value());
  EXPECT_GT(*throughput, 0);

  // Prometheus loaded every rule of deploy/prometheus/folio-rules.yml and
  // evaluated each one without error ...
  const int rule_count = CountRules(kRules);
  ASSERT_GE(rule_count, 9) << kRules;
  std::string rules_state;
  EXPECT_TRUE(WaitFor(20, [&] {
    std::optional<nlohmann::json> j = Api(prometheus_port, "/api/v1/rules");
    if (!j.has_value()) return false;
    int evaluated = 0;
    rules_state.clear();
    for (const auto& group : (*j)["data"]["groups"]) {
      for (const auto& rule : group["rules"]) {
        const std::string name = rule.value("name", "");
        const std::string health = rule.value("health", "");
        const std::string error = rule.value("lastError", "");
        const std::string last = rule.value("lastEvaluation", "");
        rules_state += name + ": " + health + " " + error + " (" + last + ")\n";
        if (health == "ok" && error.empty() && last.rfind("0001-", 0) != 0) ++evaluated;
      }
    }
    return evaluated == rule_count;
  })) << "expected " << rule_count << " rules evaluated with health ok:\n" << rules_state << Logs(dir);
  // ... and each rule's expression evaluates as a query too.
  std::optional<nlohmann::json> rules = Api(prometheus_port, "/api/v1/rules");
  ASSERT_TRUE(rules.has_value());
  int queried = 0;
  for (const auto& group : (*rules)["data"]["groups"]) {
    for (const auto& rule : group["rules"]) {
      const std::string expr = rule.value("query", "");
      EXPECT_TRUE(Query(prometheus_port, expr).has_value()) << rule.value("name", "") << ": " << expr;
      ++queried;
    }
  }
  EXPECT_EQ(queried, rule_count);
  // The recording rules produce series from the workload's data.
  EXPECT_TRUE(WaitFor(10, [&] {
    const std::optional<double> ttft = QueryOne(
        prometheus_port, "folio:time_to_first_token_seconds:p99_5m{model=\"folio-demo\"}");
    return ttft.has_value() && *ttft > 0;
  })) << "folio:time_to_first_token_seconds:p99_5m has no data";

  prometheus.Stop();
  scheduler.Stop();
  worker.Stop();
}

}  // namespace
}  // namespace folio
