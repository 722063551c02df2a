// What folio-scheduler's Prometheus metrics cost the engine loop: one
// scheduler iteration (Schedule() + plan build + Update(), N running decode
// sequences, requests finishing and being replaced) without metrics, and
// with exactly the metric work Engine::Loop adds per step — two clock
// reads, SchedulerMetrics::RecordStep (gauges, counters, the token-usage
// walk over the running sequences), one inter-token observation per output,
// first-token/queue/finish observations as requests come and go, and Flush.
// Plus that metric work alone. A scraper thread can be added (scrape:1)
// to show that scrapes do not stall the loop. Figures: docs/performance.md.

#include <benchmark/benchmark.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <thread>

#include "common/check.h"
#include "scheduler/scheduler.h"
#include "scheduler/server/scheduler_metrics.h"

namespace folio {
namespace {

constexpr int32_t kPromptLen = 64;
constexpr int32_t kMaxOutput = 512;

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class SteadyDecode {
 public:
  SteadyDecode(int32_t num_seqs, SchedulerMetrics* metrics) : metrics_(metrics), rng_(42) {
    SchedulerConfig config;
    config.block_size = 16;
    config.num_device_blocks = num_seqs * ((kPromptLen + kMaxOutput) / 16 + 2) + 64;
    config.num_host_blocks = 0;
    config.max_num_seqs = num_seqs;
    config.max_num_batched_tokens = std::max(2048, num_seqs + kPromptLen);
    config.max_model_len = 4096;
    config.enable_prefix_caching = true;
    config.check_invariants = false;
    scheduler_ = std::move(Scheduler::Create(config).value());
    for (int32_t i = 0; i < num_seqs; ++i) AddRequest();
    for (int i = 0; i < kMaxOutput; ++i) Step();
  }

  // One iteration, with the engine's metric hooks when metrics_ is set.
  size_t Step() {
    const int64_t start_ns = metrics_ != nullptr ? NowNanos() : 0;
    StepPlan plan = scheduler_->Schedule();
    result_.step_id = plan.step_id;
    size_t n = 0;
    for (const ScheduledSequence& s : plan.scheduled) {
      if (s.sample_mode == SampleMode::kNone) continue;
      if (n == result_.samples.size()) result_.samples.emplace_back();
      SequenceSamples& out = result_.samples[n++];
      out.seq_id = s.seq_id;
      out.tokens.assign(1, {static_cast<TokenId>(rng_() % 32000), -1.0f, {}});
    }
    result_.samples.resize(n);
    auto outputs = scheduler_->Update(result_);
    FOLIO_CHECK(outputs.ok());
    if (metrics_ != nullptr) {
      const int64_t now_ns = NowNanos();
      metrics_->RecordStep(*scheduler_, plan.num_scheduled_tokens, (now_ns - start_ns) * 1e-9);
      // Engine::RecordScheduled: queue time of the newly scheduled.
      for (size_t i = 0; i < plan.new_sequences.size(); ++i) metrics_->RecordQueueTime(0.01);
      // Engine::RecordOutput, per output.
      for (const RequestOutput& o : *outputs) {
        if (!o.sequences.empty() && !o.sequences[0].token_ids.empty()) {
          if (o.sequences[0].token_ids.size() == 1 && o.num_output_tokens == 1) {
            metrics_->RecordFirstToken(0.02);
          } else {
            metrics_->RecordInterToken((now_ns - last_ns_) * 1e-9);
          }
        }
        if (o.finished) metrics_->RecordFinished(FinishReason::kLength, 1.5);
      }
      last_ns_ = now_ns;
      metrics_->Flush();
    }
    for (const RequestOutput& o : *outputs) {
      if (o.finished) AddRequest();
    }
    return plan.scheduled.size();
  }

 private:
  void AddRequest() {
    RequestSpec spec;
    spec.id = next_id_++;
    spec.prompt.resize(kPromptLen);
    for (TokenId& t : spec.prompt) t = static_cast<TokenId>(rng_() % 32000);
    spec.sampling.max_tokens = 1 + static_cast<int32_t>(rng_() % kMaxOutput);
    spec.sampling.ignore_eos = true;
    FOLIO_CHECK(scheduler_->AddRequest(std::move(spec)).ok());
  }

  SchedulerMetrics* const metrics_;
  std::minstd_rand rng_;
  std::unique_ptr<Scheduler> scheduler_;
  StepResult result_;
  RequestId next_id_ = 0;
  int64_t last_ns_ = 0;
};

std::unique_ptr<SchedulerMetrics> MakeMetrics(prometheus::Registry& registry, int32_t num_seqs) {
  SchedulerMetrics::Options o;
  o.model_name = "bench";
  o.num_device_blocks = num_seqs * ((kPromptLen + kMaxOutput) / 16 + 2) + 64;
  return std::make_unique<SchedulerMetrics>(registry, o);
}

// range(0): running sequences; range(1): 0 = no metrics, 1 = metrics,
// 2 = metrics while another thread scrapes (serializes the registry) nonstop.
void BM_EngineStepMetrics(benchmark::State& state) {
  const int32_t num_seqs = static_cast<int32_t>(state.range(0));
  const int64_t mode = state.range(1);
  prometheus::Registry registry;
  std::unique_ptr<SchedulerMetrics> metrics = mode > 0 ? MakeMetrics(registry, num_seqs) : nullptr;
  SteadyDecode engine(num_seqs, metrics.get());
  std::atomic<bool> stop{false};
  std::atomic<int64_t> scrapes{0};
  std::thread scraper;
  if (mode == 2) {
    scraper = std::thread([&] {
      prometheus::TextSerializer serializer;
      while (!stop.load(std::memory_order_relaxed)) {
        benchmark::DoNotOptimize(serializer.Serialize(registry.Collect()));
        scrapes.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  size_t scheduled = 0;
  for (auto _ : state) scheduled += engine.Step();
  stop = true;
  if (scraper.joinable()) scraper.join();
  state.counters["seqs_per_step"] =
      benchmark::Counter(static_cast<double>(scheduled) / static_cast<double>(state.iterations()));
  if (mode == 2) state.counters["scrapes"] = benchmark::Counter(static_cast<double>(scrapes.load()));
}
BENCHMARK(BM_EngineStepMetrics)
    ->ArgNames({"seqs", "metrics"})
    ->ArgsProduct({{16, 256}, {0, 1}})
    ->Args({256, 2})
    ->Unit(benchmark::kMicrosecond);

// The metric work of one step alone, with N running sequences: RecordStep,
// N inter-token observations, Flush.
void BM_MetricsPerStep(benchmark::State& state) {
  const int32_t num_seqs = static_cast<int32_t>(state.range(0));
  prometheus::Registry registry;
  std::unique_ptr<SchedulerMetrics> metrics = MakeMetrics(registry, num_seqs);
  // N requests decoding (after 8 steps), for RecordStep to read.
  SchedulerConfig config;
  config.block_size = 16;
  config.num_device_blocks = num_seqs * ((kPromptLen + kMaxOutput) / 16 + 2) + 64;
  config.max_num_seqs = num_seqs;
  config.max_num_batched_tokens = std::max(2048, num_seqs + kPromptLen);
  config.max_model_len = 4096;
  config.check_invariants = false;
  std::unique_ptr<Scheduler> s = std::move(Scheduler::Create(config).value());
  std::minstd_rand rng(7);
  for (int32_t i = 0; i < num_seqs; ++i) {
    RequestSpec spec;
    spec.id = i;
    spec.prompt.resize(kPromptLen);
    for (TokenId& t : spec.prompt) t = static_cast<TokenId>(rng() % 32000);
    spec.sampling.max_tokens = kMaxOutput;
    spec.sampling.ignore_eos = true;
    FOLIO_CHECK(s->AddRequest(std::move(spec)).ok());
  }
  StepResult result;
  for (int step = 0; step < 8; ++step) {
    StepPlan plan = s->Schedule();
    result.step_id = plan.step_id;
    result.samples.clear();
    for (const ScheduledSequence& q : plan.scheduled) {
      if (q.sample_mode == SampleMode::kNone) continue;
      result.samples.push_back({q.seq_id, {SampledToken{static_cast<TokenId>(rng() % 32000), -1.0f, {}}}});
    }
    FOLIO_CHECK(s->Update(result).ok());
  }
  const Scheduler* scheduler = s.get();
  FOLIO_CHECK(scheduler->num_running() == num_seqs);
  double t = 0.001;
  for (auto _ : state) {
    metrics->RecordStep(*scheduler, num_seqs, t);
    for (int32_t i = 0; i < num_seqs; ++i) metrics->RecordInterToken(t);
    metrics->Flush();
    t = t < 1.0 ? t * 1.01 : 0.001;
  }
}
BENCHMARK(BM_MetricsPerStep)->Arg(16)->Arg(256)->Arg(1024)->Unit(benchmark::kNanosecond);

}  // namespace
}  // namespace folio

BENCHMARK_MAIN();
