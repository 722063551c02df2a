// folio-scheduler's Prometheus metrics, scraped over real HTTP from the
// endpoint (common/metrics_server.h) while the engine serves the demo model
// on an in-process CPU worker: every DESIGN.md name with its type and
// labels, counters that match the workload exactly, KV gauges that move and
// come back to zero, preemptions by mode, prefix-cache hits in tokens, and
// (on a windowed scheduler driven by a simulated worker) the blocks given
// back by sliding windows.

#include "scheduler/server/scheduler_metrics.h"

#include <prometheus/registry.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/metrics_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/simulated_worker.h"
#include "server_test_util.h"
#include "tests/common/metrics_scrape.h"

namespace folio {
namespace {

using testing::Exposition;
using testing::Scrape;
using namespace testing_util;

constexpr int kMaxTokens = 24;

// Metrics, their endpoint on a free port, and an engine updating them.
struct Served {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<SchedulerMetrics> metrics;
  std::unique_ptr<MetricsServer> server;
  std::unique_ptr<Engine> engine;  // last: destroyed first, before the metrics

  Exposition Get() const { return Scrape(server->port()); }
};

// `refresh_interval_s` 0: every figure every step (the tests that look
// mid-flight compare exact figures); the default lags by up to 1 ms of step
// time and catches up when the engine goes idle.
// The host tier's byte counters take this as the bytes of a block.
constexpr uint64_t kBlockBytes = 65536;

std::unique_ptr<Served> Serve(EngineSetup setup, double refresh_interval_s = 0) {
  auto s = std::make_unique<Served>();
  SchedulerMetrics::Options mo;
  mo.block_bytes = kBlockBytes;
  mo.model_name = "folio-demo";
  mo.block_size = setup.block_size;
  mo.num_device_blocks = setup.num_device_blocks;
  mo.num_host_blocks = setup.num_host_blocks;
  mo.kv_cache_dtype = "int8";
  mo.refresh_interval_s = refresh_interval_s;
  s->metrics = std::make_unique<SchedulerMetrics>(*s->registry, mo);
  absl::StatusOr<std::unique_ptr<MetricsServer>> server =
      MetricsServer::Start("127.0.0.1", 0, s->registry);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return nullptr;
  s->server = std::move(*server);
  setup.metrics = s->metrics.get();
  s->engine = MakeDemoEngine(setup);
  if (s->engine == nullptr) return nullptr;
  return s;
}

// The value of a series; -1 (and a failure) when it is missing.
double Must(const Exposition& e, const std::string& name,
            const std::map<std::string, std::string>& labels = {}) {
  std::map<std::string, std::string> match = labels;
  match.emplace("model", "folio-demo");
  std::optional<double> v = e.Value(name, match);
  EXPECT_TRUE(v.has_value()) << name << " with the given labels is missing or not unique";
  return v.value_or(-1.0);
}

TEST(MetricsServerTest, ServesOnAnyFreePortAndRefusesATakenOne) {
  auto registry = std::make_shared<prometheus::Registry>();
  absl::StatusOr<std::unique_ptr<MetricsServer>> a = MetricsServer::Start("127.0.0.1", 0, registry);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_GT((*a)->port(), 0);
  EXPECT_TRUE(testing::HttpGet((*a)->port(), "/metrics").has_value());
  absl::StatusOr<std::unique_ptr<MetricsServer>> b =
      MetricsServer::Start("127.0.0.1", (*a)->port(), registry);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kUnavailable) << b.status();
  EXPECT_EQ(MetricsServer::Start("127.0.0.1", 70000, registry).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SchedulerMetricsTest, EveryDesignMetricIsServedWithItsTypeAndLabels) {
  EngineSetup setup;
  setup.num_host_blocks = 32;
  std::unique_ptr<Served> s = Serve(setup);
  ASSERT_NE(s, nullptr);
  const Exposition e = s->Get();
  const std::map<std::string, std::string> want = {
      {"folio_kv_cache_blocks_total", "gauge"},
      {"folio_kv_cache_blocks_used", "gauge"},
      {"folio_kv_cache_usage_ratio", "gauge"},
      {"folio_kv_cache_token_usage_ratio", "gauge"},
      {"folio_kv_cache_fragmentation_ratio", "gauge"},
      {"folio_requests_running", "gauge"},
      {"folio_requests_waiting", "gauge"},
      {"folio_requests_swapped", "gauge"},
      {"folio_preemptions_total", "counter"},
      {"folio_prefix_cache_queries_total", "counter"},
      {"folio_prefix_cache_hits_total", "counter"},
      {"folio_prefix_cache_host_hits_total", "counter"},
      {"folio_prefix_cache_host_tier_blocks_total", "counter"},
      {"folio_prefix_cache_host_tier_bytes_total", "counter"},
      {"folio_prefix_cache_host_tier_over_budget_blocks_total", "counter"},
      {"folio_prompt_tokens_total", "counter"},
      {"folio_generation_tokens_total", "counter"},
      {"folio_request_success_total", "counter"},
      {"folio_time_to_first_token_seconds", "histogram"},
      {"folio_inter_token_latency_seconds", "histogram"},
      {"folio_e2e_request_latency_seconds", "histogram"},
      {"folio_request_queue_time_seconds", "histogram"},
      {"folio_step_duration_seconds", "histogram"},
      {"folio_step_tokens", "histogram"},
      {"folio_build_info", "gauge"},
  };
  for (const auto& [name, type] : want) {
    auto it = e.types.find(name);
    ASSERT_NE(it, e.types.end()) << name << " is not served";
    EXPECT_EQ(it->second, type) << name;
  }
  // Every series carries the model label.
  for (const testing::Sample& sample : e.samples) {
    if (sample.name.rfind("folio_", 0) != 0) continue;
    EXPECT_EQ(sample.labels.count("model"), 1u) << sample.name;
  }
  for (const char* pool : {"device", "host"}) {
    for (const char* name :
         {"folio_kv_cache_blocks_total", "folio_kv_cache_blocks_used", "folio_kv_cache_usage_ratio"}) {
      Must(e, name, {{"pool", pool}});
    }
  }
  EXPECT_EQ(Must(e, "folio_kv_cache_blocks_total", {{"pool", "device"}}), 256);
  EXPECT_EQ(Must(e, "folio_kv_cache_blocks_total", {{"pool", "host"}}), 32);
  EXPECT_EQ(Must(e, "folio_preemptions_total", {{"mode", "swap"}}), 0);
  EXPECT_EQ(Must(e, "folio_preemptions_total", {{"mode", "recompute"}}), 0);
  for (const char* reason : {"length", "stop", "eos", "abort", "error"}) {
    EXPECT_EQ(Must(e, "folio_request_success_total", {{"finish_reason", reason}}), 0) << reason;
  }
  EXPECT_EQ(Must(e, "folio_build_info", {{"block_size", "16"},
                                        {"num_device_blocks", "256"},
                                        {"num_host_blocks", "32"},
                                        {"tensor_parallel_size", "1"},
                                        {"kv_cache_dtype", "int8"}}),
            1);
  EXPECT_EQ(e.Find("folio_build_info")[0].labels.count("version"), 1u);
  // Histogram buckets: TTFT from 1 ms to minutes.
  EXPECT_EQ(Must(e, "folio_time_to_first_token_seconds_bucket", {{"le", "0.001"}}), 0);
  EXPECT_EQ(Must(e, "folio_time_to_first_token_seconds_bucket", {{"le", "2560"}}), 0);
  EXPECT_EQ(Must(e, "folio_time_to_first_token_seconds_count"), 0);
}

TEST(SchedulerMetricsTest, CountersMatchAWorkloadAndKvBlocksReturnToZero) {
  // The production refresh interval: everything is exact once idle.
  std::unique_ptr<Served> s = Serve({}, SchedulerMetrics::Options().refresh_interval_s);
  ASSERT_NE(s, nullptr);
  const std::vector<ReferenceCase> cases = LoadReference();
  std::vector<Submitted> subs;
  for (const ReferenceCase& c : cases) subs.push_back(Submit(*s->engine, GreedyRequest(c.prompt, kMaxTokens)));
  int64_t prompt_tokens = 0, completion_tokens = 0;
  for (Submitted& sub : subs) {
    ASSERT_TRUE(sub.sink->Wait());
    v1::Usage usage;
    Reassemble(sub.sink->responses(), &usage);
    prompt_tokens += usage.prompt_tokens();
    completion_tokens += usage.completion_tokens();
  }
  ASSERT_TRUE(s->engine->WaitIdle(absl::Seconds(60)));
  const int64_t n = static_cast<int64_t>(cases.size());
  const Exposition e = s->Get();

  EXPECT_EQ(Must(e, "folio_kv_cache_blocks_used", {{"pool", "device"}}), 0);
  EXPECT_EQ(Must(e, "folio_kv_cache_usage_ratio", {{"pool", "device"}}), 0);
  EXPECT_EQ(Must(e, "folio_kv_cache_token_usage_ratio"), 0);
  EXPECT_EQ(Must(e, "folio_kv_cache_fragmentation_ratio"), 0);
  EXPECT_EQ(Must(e, "folio_requests_running"), 0);
  EXPECT_EQ(Must(e, "folio_requests_waiting"), 0);
  EXPECT_EQ(Must(e, "folio_requests_swapped"), 0);

  EXPECT_EQ(Must(e, "folio_prompt_tokens_total"), prompt_tokens);
  EXPECT_EQ(Must(e, "folio_generation_tokens_total"), completion_tokens);
  EXPECT_EQ(completion_tokens, n * kMaxTokens);
  EXPECT_EQ(Must(e, "folio_request_success_total", {{"finish_reason", "length"}}), n);
  EXPECT_EQ(Must(e, "folio_request_success_total", {{"finish_reason", "abort"}}), 0);
  EXPECT_EQ(Must(e, "folio_preemptions_total", {{"mode", "recompute"}}) +
                Must(e, "folio_preemptions_total", {{"mode", "swap"}}),
            0);
  // Every prompt token was looked up once (no preemption here).
  EXPECT_EQ(Must(e, "folio_prefix_cache_queries_total"), prompt_tokens);
  // No host tier here: nothing moved to or from it.
  EXPECT_EQ(Must(e, "folio_prefix_cache_host_hits_total"), 0);
  EXPECT_EQ(Must(e, "folio_prefix_cache_host_tier_blocks_total", {{"direction", "to_host"}}), 0);
  EXPECT_EQ(Must(e, "folio_prefix_cache_host_tier_blocks_total", {{"direction", "from_host"}}),
            0);
  const double hits = Must(e, "folio_prefix_cache_hits_total");

  // One observation per request, per later output, per step.
  EXPECT_EQ(Must(e, "folio_time_to_first_token_seconds_count"), n);
  EXPECT_EQ(Must(e, "folio_e2e_request_latency_seconds_count"), n);
  EXPECT_EQ(Must(e, "folio_request_queue_time_seconds_count"), n);
  EXPECT_EQ(Must(e, "folio_inter_token_latency_seconds_count"), n * (kMaxTokens - 1));
  const int64_t steps = s->engine->Snapshot().num_steps;
  EXPECT_EQ(Must(e, "folio_step_duration_seconds_count"), steps);
  EXPECT_EQ(Must(e, "folio_step_tokens_count"), steps);
  // Computed tokens: every prompt token not found in the cache, and every
  // output token but the last (sampled, never fed back).
  EXPECT_EQ(Must(e, "folio_step_tokens_sum"), prompt_tokens - hits + n * (kMaxTokens - 1));
  EXPECT_GT(Must(e, "folio_step_duration_seconds_sum"), 0);
  // Latencies are ordered: first token before the end.
  EXPECT_LE(Must(e, "folio_time_to_first_token_seconds_sum"),
            Must(e, "folio_e2e_request_latency_seconds_sum"));
  EXPECT_LE(Must(e, "folio_request_queue_time_seconds_sum"),
            Must(e, "folio_time_to_first_token_seconds_sum"));
  // Buckets are cumulative and end at the count.
  for (const char* h : {"folio_time_to_first_token_seconds", "folio_inter_token_latency_seconds",
                        "folio_e2e_request_latency_seconds", "folio_request_queue_time_seconds",
                        "folio_step_duration_seconds", "folio_step_tokens"}) {
    const std::string name = std::string(h) + "_bucket";
    double last = 0;
    for (const testing::Sample& b : e.Find(name)) {
      EXPECT_GE(b.value, last) << name << " le=" << b.labels.at("le");
      last = b.value;
    }
    EXPECT_EQ(Must(e, name, {{"le", "+Inf"}}), Must(e, std::string(h) + "_count")) << h;
  }
}

TEST(SchedulerMetricsTest, KvGaugesMoveWhileServingAndAnAbortIsCounted) {
  CpuWorkerGroup* group = nullptr;
  EngineSetup setup;
  setup.group_out = &group;
  std::unique_ptr<Served> s = Serve(setup);
  ASSERT_NE(s, nullptr);
  // Steps 0 (the prefill) to 3 run; step 4 waits, so the gauges stand still.
  group->HoldAtStep(4);
  struct ReleaseAtEnd {
    CpuWorkerGroup* group;
    ~ReleaseAtEnd() { group->Release(); }
  } release{group};
  Submitted sub = Submit(*s->engine, GreedyRequest("In the beginning God created the heaven and the earth.", 400));
  ASSERT_TRUE(group->WaitHeld(4));
  const Exposition during = s->Get();
  group->Release();
  ASSERT_TRUE(s->engine->Abort(sub.id));
  ASSERT_TRUE(sub.sink->Wait());
  ASSERT_TRUE(s->engine->WaitIdle(absl::Seconds(60)));
  v1::Usage usage;
  Reassemble(sub.sink->responses(), &usage);

  // After 4 steps the prompt and 3 generated tokens are computed; step 4,
  // which computes the 4th, is planned and in flight (the engine sends the
  // next plan before it delivers outputs), so its slot is allocated too: the
  // block gauges count just enough 16-token blocks for prompt + 4 tokens,
  // while token usage counts the tokens computed into them.
  const int64_t computed = usage.prompt_tokens() + 3;
  const int64_t blocks = (computed + 1 + 15) / 16;
  EXPECT_EQ(Must(during, "folio_kv_cache_blocks_used", {{"pool", "device"}}), blocks);
  EXPECT_DOUBLE_EQ(Must(during, "folio_kv_cache_usage_ratio", {{"pool", "device"}}), blocks / 256.0);
  EXPECT_DOUBLE_EQ(Must(during, "folio_kv_cache_token_usage_ratio"), computed / (16.0 * blocks));
  EXPECT_DOUBLE_EQ(Must(during, "folio_kv_cache_fragmentation_ratio"),
                   1 - computed / (16.0 * blocks));
  EXPECT_EQ(Must(during, "folio_requests_running"), 1);
  EXPECT_EQ(Must(during, "folio_generation_tokens_total"), 4);
  EXPECT_EQ(Must(during, "folio_prompt_tokens_total"), usage.prompt_tokens());
  EXPECT_EQ(Must(during, "folio_step_duration_seconds_count"), 4);
  EXPECT_EQ(Must(during, "folio_step_tokens_sum"), computed);
  EXPECT_EQ(Must(during, "folio_request_queue_time_seconds_count"), 1);
  EXPECT_EQ(Must(during, "folio_time_to_first_token_seconds_count"), 1);
  EXPECT_EQ(Must(during, "folio_inter_token_latency_seconds_count"), 3);
  EXPECT_EQ(Must(during, "folio_e2e_request_latency_seconds_count"), 0);

  const Exposition after = s->Get();
  EXPECT_EQ(Must(after, "folio_kv_cache_blocks_used", {{"pool", "device"}}), 0);
  EXPECT_EQ(Must(after, "folio_kv_cache_token_usage_ratio"), 0);
  EXPECT_EQ(Must(after, "folio_kv_cache_fragmentation_ratio"), 0);
  EXPECT_EQ(Must(after, "folio_requests_running"), 0);
  EXPECT_EQ(Must(after, "folio_request_success_total", {{"finish_reason", "abort"}}), 1);
  EXPECT_EQ(Must(after, "folio_e2e_request_latency_seconds_count"), 1);
  EXPECT_EQ(Must(after, "folio_generation_tokens_total"), usage.completion_tokens());
}

// Parallel sampling: the samples share the prompt's blocks, then each
// copies the last, partly filled one on its first write; token usage counts
// every shared slot once.
TEST(SchedulerMetricsTest, TokenUsageCountsSharedBlocksOnce) {
  CpuWorkerGroup* group = nullptr;
  EngineSetup setup;
  setup.group_out = &group;
  std::unique_ptr<Served> s = Serve(setup);
  ASSERT_NE(s, nullptr);
  group->HoldAtStep(1);
  struct ReleaseAtEnd {
    CpuWorkerGroup* group;
    ~ReleaseAtEnd() { group->Release(); }
  } release{group};
  v1::GenerateRequest r = GreedyRequest("And God said, Let there be light: and there was light.", 8);
  r.mutable_sampling_params()->set_n(3);
  r.mutable_sampling_params()->set_temperature(1.0f);
  r.mutable_sampling_params()->set_seed(7);
  Submitted sub = Submit(*s->engine, r);
  ASSERT_TRUE(group->WaitHeld(1));
  const Exposition shared = s->Get();  // after the prefill: 3 samples, one table
  group->HoldAtStep(2);
  ASSERT_TRUE(group->WaitHeld(2));
  const Exposition copied = s->Get();  // after each sample computed its first token
  group->Release();
  ASSERT_TRUE(sub.sink->Wait());
  v1::Usage usage;
  Reassemble(sub.sink->responses(), &usage);
  const int64_t p = usage.prompt_tokens();
  ASSERT_EQ(usage.completion_tokens(), 24u);

  const int64_t prompt_blocks = (p + 15) / 16;
  EXPECT_EQ(Must(shared, "folio_kv_cache_blocks_used", {{"pool", "device"}}), prompt_blocks);
  EXPECT_DOUBLE_EQ(Must(shared, "folio_kv_cache_token_usage_ratio"), p / (16.0 * prompt_blocks));
  EXPECT_EQ(Must(shared, "folio_generation_tokens_total"), 3);

  const int64_t full = p / 16;  // still shared; each sample owns its last block
  const int64_t tokens = 16 * full + 3 * (p - 16 * full + 1);
  EXPECT_EQ(Must(copied, "folio_kv_cache_blocks_used", {{"pool", "device"}}), full + 3);
  EXPECT_DOUBLE_EQ(Must(copied, "folio_kv_cache_token_usage_ratio"), tokens / (16.0 * (full + 3)));
  EXPECT_DOUBLE_EQ(Must(copied, "folio_kv_cache_fragmentation_ratio"),
                   1 - tokens / (16.0 * (full + 3)));
}

// The pool of engine_test's preemption test: far too small for the load.
TEST(SchedulerMetricsTest, PreemptionsAreCountedByModeUnderATinyPool) {
  const std::vector<ReferenceCase> cases = LoadReference();
  for (PreemptionMode mode : {PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
    SCOPED_TRACE(PreemptionModeName(mode));
    EngineSetup setup;
    setup.num_device_blocks = 12;
    setup.num_host_blocks = mode == PreemptionMode::kSwap ? 64 : 0;
    setup.preemption_mode = mode;
    std::unique_ptr<Served> s = Serve(setup);
    ASSERT_NE(s, nullptr);
    std::vector<Submitted> subs;
    for (const ReferenceCase& c : cases) subs.push_back(Submit(*s->engine, GreedyRequest(c.prompt, kMaxTokens)));
    for (Submitted& sub : subs) ASSERT_TRUE(sub.sink->Wait());
    ASSERT_TRUE(s->engine->WaitIdle(absl::Seconds(60)));
    const Exposition e = s->Get();
    const int64_t preemptions = s->engine->Snapshot().num_preemptions;
    EXPECT_GT(preemptions, 0) << "the pool was meant to be too small";
    const bool swap = mode == PreemptionMode::kSwap;
    EXPECT_EQ(Must(e, "folio_preemptions_total", {{"mode", swap ? "swap" : "recompute"}}), preemptions);
    EXPECT_EQ(Must(e, "folio_preemptions_total", {{"mode", swap ? "recompute" : "swap"}}), 0);
    const int64_t n = static_cast<int64_t>(cases.size());
    EXPECT_EQ(Must(e, "folio_request_success_total", {{"finish_reason", "length"}}), n);
    EXPECT_EQ(Must(e, "folio_generation_tokens_total"), n * kMaxTokens);
    EXPECT_EQ(Must(e, "folio_request_queue_time_seconds_count"), n);
    EXPECT_EQ(Must(e, "folio_inter_token_latency_seconds_count"), n * (kMaxTokens - 1));
    for (const char* pool : {"device", "host"}) {
      EXPECT_EQ(Must(e, "folio_kv_cache_blocks_used", {{"pool", pool}}), 0) << pool;
    }
    EXPECT_EQ(Must(e, "folio_requests_swapped"), 0);
  }
}

TEST(SchedulerMetricsTest, PrefixCacheHitsAreCountedInTokens) {
  std::unique_ptr<Served> s = Serve({});
  ASSERT_NE(s, nullptr);
  const std::string prompt =
      "In the beginning God created the heaven and the earth. And the earth was without form, "
      "and void; and darkness was upon the face of the deep.";
  v1::Usage first_usage, second_usage;
  for (v1::Usage* usage : {&first_usage, &second_usage}) {
    Submitted sub = Submit(*s->engine, GreedyRequest(prompt, 4));
    ASSERT_TRUE(sub.sink->Wait());
    Reassemble(sub.sink->responses(), usage);
  }
  ASSERT_TRUE(s->engine->WaitIdle(absl::Seconds(60)));
  const Exposition e = s->Get();
  ASSERT_GE(first_usage.prompt_tokens(), 33u) << "the prompt should fill two blocks";
  EXPECT_EQ(Must(e, "folio_prefix_cache_queries_total"), 2.0 * first_usage.prompt_tokens());
  const double hits = Must(e, "folio_prefix_cache_hits_total");
  EXPECT_EQ(hits, second_usage.cached_prompt_tokens());
  EXPECT_GE(hits, 32);
  EXPECT_EQ(std::fmod(hits, 16.0), 0.0) << "hits are whole blocks";
}

// A prompt whose blocks two others evicted comes back from the host tier:
// its hits, the blocks moved each way and their bytes are counted.
TEST(SchedulerMetricsTest, HostTierHitsAndTrafficAreCounted) {
  EngineSetup setup;
  setup.num_device_blocks = 8;
  setup.num_host_blocks = 32;
  setup.host_prefix_cache = true;
  setup.max_num_seqs = 1;
  std::unique_ptr<Served> s = Serve(setup);
  ASSERT_NE(s, nullptr);
  const std::string first =
      "In the beginning God created the heaven and the earth. And the earth was without form, "
      "and void; and darkness was upon the face of the deep.";
  std::string second, third;
  for (int i = 0; i < 2; ++i) {
    second += "And God said, Let there be light: and there was light. And God saw the light, "
              "that it was good: and God divided the light from the darkness. ";
    third += "And God called the light Day, and the darkness he called Night. And the evening "
             "and the morning were the first day. ";
  }
  v1::Usage last;
  for (const std::string* prompt : std::vector<const std::string*>{&first, &second, &third, &first}) {
    Submitted sub = Submit(*s->engine, GreedyRequest(*prompt, 4));
    ASSERT_TRUE(sub.sink->Wait());
    Reassemble(sub.sink->responses(), &last);
  }
  ASSERT_TRUE(s->engine->WaitIdle(absl::Seconds(60)));
  const Exposition e = s->Get();
  const double host_hits = Must(e, "folio_prefix_cache_host_hits_total");
  EXPECT_EQ(host_hits, last.cached_prompt_tokens());
  EXPECT_GE(host_hits, 32);
  const double to_host = Must(e, "folio_prefix_cache_host_tier_blocks_total", {{"direction", "to_host"}});
  const double from_host =
      Must(e, "folio_prefix_cache_host_tier_blocks_total", {{"direction", "from_host"}});
  EXPECT_EQ(from_host, host_hits / 16);
  EXPECT_GE(to_host, from_host);
  EXPECT_EQ(Must(e, "folio_prefix_cache_host_tier_bytes_total", {{"direction", "to_host"}}),
            to_host * kBlockBytes);
  EXPECT_EQ(Must(e, "folio_prefix_cache_host_tier_bytes_total", {{"direction", "from_host"}}),
            from_host * kBlockBytes);
  EXPECT_EQ(Must(e, "folio_prefix_cache_host_tier_over_budget_blocks_total"), 0);
  EXPECT_EQ(Must(e, "folio_kv_cache_blocks_used", {{"pool", "device"}}), 0);
}

TEST(SchedulerMetricsTest, WindowReleasesAreCounted) {
  SchedulerConfig c;
  c.block_size = 8;
  c.num_device_blocks = 64;
  c.max_model_len = 512;
  c.sliding_window = 12;
  c.check_invariants = true;
  absl::StatusOr<std::unique_ptr<Scheduler>> sched = Scheduler::Create(c);
  ASSERT_TRUE(sched.ok()) << sched.status();
  SimulatedWorker::Options wo;
  wo.block_size = c.block_size;
  wo.num_device_blocks = c.num_device_blocks;
  wo.sliding_window = c.sliding_window;
  SimulatedWorker worker(wo);
  auto registry = std::make_shared<prometheus::Registry>();
  SchedulerMetrics::Options mo;
  mo.model_name = "folio-demo";
  mo.block_size = c.block_size;
  mo.num_device_blocks = c.num_device_blocks;
  mo.refresh_interval_s = 0;
  SchedulerMetrics metrics(*registry, mo);
  absl::StatusOr<std::unique_ptr<MetricsServer>> server =
      MetricsServer::Start("127.0.0.1", 0, registry);
  ASSERT_TRUE(server.ok()) << server.status();
  for (RequestId id = 0; id < 3; ++id) {
    RequestSpec r;
    r.id = id;
    r.prompt.assign(20 + id, 7 + static_cast<TokenId>(id));
    r.sampling.max_tokens = 100;
    r.sampling.ignore_eos = true;
    ASSERT_TRUE((*sched)->AddRequest(r).ok());
  }
  for (int step = 0; (*sched)->HasUnfinishedRequests(); ++step) {
    ASSERT_LT(step, 1000);
    const StepPlan plan = (*sched)->Schedule();
    absl::StatusOr<StepResult> result = worker.Execute(plan);
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_TRUE((*sched)->Update(*result).ok());
    metrics.RecordStep(**sched, plan.num_scheduled_tokens, 0.001);
  }
  const int64_t released = (*sched)->stats().num_window_released_blocks;
  EXPECT_GT(released, 3 * 10);  // ~120 tokens each, about 2 blocks kept
  EXPECT_EQ(Must(Scrape((*server)->port()), "folio_kv_cache_window_released_blocks_total"),
            released);
}

}  // namespace
}  // namespace folio
