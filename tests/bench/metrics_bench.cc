// What folio-scheduler's Prometheus metrics cost the engine loop: one
// scheduler iteration (Schedule() + plan build + Update(), N running decode
// sequences, requests finishing and being replaced) without metrics, and
// with exactly the metric work Engine::Loop adds per step — two clock
// reads, SchedulerMetrics::RecordStep (gauges, counters, the token-usage
// walk over the running sequences), one inter-token observation per output,
// first-token/queue/finish observations as requests come and go, and Flush.
// Plus that metric work alone (a scraper thread can run beside it,
// metrics:2, to show scrapes do not stall the loop), and the whole Engine
// loop — scheduling, an instant fake worker group, detokenizing and
// streaming every delta — with and without metrics. Figures:
// docs/performance.md.

#include <benchmark/benchmark.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "common/check.h"
#include "common/worker_group.h"
#include "scheduler/scheduler.h"
#include "scheduler/server/engine.h"
#include "scheduler/server/scheduler_metrics.h"
#include "steady_decode.h"

namespace folio {
namespace {

using bench::SteadyDecode;

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// SteadyDecode plus, when `metrics` is set, exactly the metric work
// Engine::Loop adds per step.
class MeteredDecode {
 public:
  MeteredDecode(int32_t num_seqs, SchedulerMetrics* metrics)
      : decode_(num_seqs), metrics_(metrics) {}

  size_t Step() {
    if (metrics_ == nullptr) return decode_.Step();
    const int64_t start_ns = NowNanos();
    return decode_.Step([&](const StepPlan& plan, const std::vector<RequestOutput>& outputs) {
      const int64_t now_ns = NowNanos();
      metrics_->RecordStep(decode_.scheduler(), plan.num_scheduled_tokens,
                           (now_ns - start_ns) * 1e-9);
      // Engine::RecordScheduled: queue time of the newly scheduled.
      for (size_t i = 0; i < plan.new_sequences.size(); ++i) metrics_->RecordQueueTime(0.01);
      // Engine::RecordOutput, per output.
      for (const RequestOutput& o : outputs) {
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
      metrics_->Flush(/*force=*/false);
    });
  }

 private:
  SteadyDecode decode_;
  SchedulerMetrics* const metrics_;
  int64_t last_ns_ = 0;
};

std::unique_ptr<SchedulerMetrics> MakeMetrics(prometheus::Registry& registry, int32_t num_seqs) {
  SchedulerMetrics::Options o;
  o.model_name = "bench";
  o.num_device_blocks = SteadyDecode::DeviceBlocksFor(num_seqs);
  return std::make_unique<SchedulerMetrics>(registry, o);
}

// range(0): running sequences; range(1): 0 = no metrics, 1 = metrics,
// 2 = metrics while another thread scrapes (serializes the registry) nonstop.
void BM_EngineStepMetrics(benchmark::State& state) {
  const int32_t num_seqs = static_cast<int32_t>(state.range(0));
  const int64_t mode = state.range(1);
  prometheus::Registry registry;
  std::unique_ptr<SchedulerMetrics> metrics = mode > 0 ? MakeMetrics(registry, num_seqs) : nullptr;
  MeteredDecode engine(num_seqs, metrics.get());
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
  // N requests decoding (every prompt in), for RecordStep to read.
  SchedulerConfig config;
  config.block_size = 16;
  config.num_device_blocks = SteadyDecode::DeviceBlocksFor(num_seqs);
  config.max_num_seqs = num_seqs;
  config.max_num_batched_tokens = std::max(2048, num_seqs + SteadyDecode::kPromptLen);
  config.max_model_len = 4096;
  config.check_invariants = false;
  std::unique_ptr<Scheduler> s = std::move(Scheduler::Create(config).value());
  std::minstd_rand rng(7);
  for (int32_t i = 0; i < num_seqs; ++i) {
    RequestSpec spec;
    spec.id = i;
    spec.prompt.resize(SteadyDecode::kPromptLen);
    for (TokenId& t : spec.prompt) t = static_cast<TokenId>(rng() % 32000);
    spec.sampling.max_tokens = SteadyDecode::kMaxOutput;
    spec.sampling.ignore_eos = true;
    FOLIO_CHECK(s->AddRequest(std::move(spec)).ok());
  }
  StepResult result;
  for (int step = 0; step < 1000 && (step < 8 || s->num_running() < num_seqs); ++step) {
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
  const int64_t part = state.range(1);  // 0: all; 1: RecordStep; 2: observations + Flush
  double t = 0.001;
  for (auto _ : state) {
    if (part != 2) metrics->RecordStep(*scheduler, num_seqs, t);
    if (part != 1) {
      for (int32_t i = 0; i < num_seqs; ++i) metrics->RecordInterToken(t);
      metrics->Flush(/*force=*/true);
    }
    t = t < 1.0 ? t * 1.01 : 0.001;
  }
}
BENCHMARK(BM_MetricsPerStep)
    ->ArgNames({"seqs", "part"})
    ->ArgsProduct({{16, 256, 1024}, {0, 1, 2}})
    ->Unit(benchmark::kNanosecond);

// A worker group that answers at once: random tokens for every sample.
class InstantWorkers final : public WorkerGroup {
 public:
  absl::StatusOr<StepResult> Execute(const StepPlan& plan) override {
    StepResult result;
    result.step_id = plan.step_id;
    for (const ScheduledSequence& s : plan.scheduled) {
      if (s.sample_mode == SampleMode::kNone) continue;
      SequenceSamples& out = result.samples.emplace_back();
      out.seq_id = s.seq_id;
      for (int32_t i = 0; i < std::max(s.num_samples, 1); ++i) {
        out.tokens.push_back({static_cast<TokenId>(3 + rng_() % 2000), -1.0f, {}});
      }
    }
    return result;
  }

 private:
  std::minstd_rand rng_{11};
};

// Counts finished streams; drops the messages.
class CountingSink final : public GenerateSink {
 public:
  CountingSink(std::mutex* mu, std::condition_variable* cv, int* done)
      : mu_(mu), cv_(cv), done_(done) {}
  void OnResponse(v1::GenerateResponse response) override {
    if (!response.has_finished()) return;
    std::lock_guard<std::mutex> lock(*mu_);
    ++*done_;
    cv_->notify_all();
  }
  void OnError(absl::Status) override { OnResponse(v1::GenerateResponse()); }

 private:
  std::mutex* mu_;
  std::condition_variable* cv_;
  int* done_;
};

// The whole engine loop: range(0) requests of 64 prompt tokens generating
// 128 tokens each, all submitted at once (so range(0) decode together);
// range(1): metrics off / on. Reports time per engine step.
void BM_EngineLoop(benchmark::State& state) {
  const int32_t num_requests = static_cast<int32_t>(state.range(0));
  const bool with_metrics = state.range(1) != 0;
  const std::string demo = std::string(FOLIO_SOURCE_DIR) + "/models/folio-demo";
  int64_t steps = 0;
  double seconds = 0;
  for (auto _ : state) {
    state.PauseTiming();
    prometheus::Registry registry;
    std::unique_ptr<SchedulerMetrics> metrics;
    Engine::Options eo;
    eo.scheduler.block_size = 16;
    eo.scheduler.num_device_blocks = num_requests * (192 / 16 + 1) + 16;
    eo.scheduler.max_num_seqs = num_requests;
    eo.scheduler.max_num_batched_tokens = std::max(2048, num_requests);
    eo.scheduler.max_model_len = 512;
    eo.scheduler.check_invariants = false;
    eo.model_name = "bench";
    if (with_metrics) {
      SchedulerMetrics::Options mo;
      mo.model_name = "bench";
      mo.num_device_blocks = eo.scheduler.num_device_blocks;
      metrics = std::make_unique<SchedulerMetrics>(registry, mo);
      eo.metrics = metrics.get();
    }
    RequestLimits limits;
    limits.vocab_size = 2048;
    limits.max_model_len = 512;
    auto engine = Engine::Create(eo, std::move(Tokenizer::LoadFromDirectory(demo).value()), limits,
                                 std::make_unique<InstantWorkers>());
    FOLIO_CHECK(engine.ok());
    std::mutex mu;
    std::condition_variable cv;
    int done = 0;
    std::minstd_rand rng(5);
    std::vector<v1::GenerateRequest> requests(num_requests);
    for (v1::GenerateRequest& r : requests) {
      for (int t = 0; t < 64; ++t) r.mutable_token_ids()->add_ids(static_cast<int32_t>(3 + rng() % 2000));
      r.mutable_sampling_params()->set_max_tokens(128);
      r.mutable_sampling_params()->set_ignore_eos(true);
      r.mutable_sampling_params()->set_temperature(0);
    }
    for (const v1::GenerateRequest& r : requests) {
      FOLIO_CHECK((*engine)->Submit(r, std::make_shared<CountingSink>(&mu, &cv, &done)).ok());
    }
    state.ResumeTiming();
    const auto start = std::chrono::steady_clock::now();
    (*engine)->Start();
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return done == num_requests; });
    }
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.PauseTiming();
    steps += (*engine)->Snapshot().num_steps;
    engine->reset();
    state.ResumeTiming();
  }
  state.counters["us_per_step"] = benchmark::Counter(1e6 * seconds / static_cast<double>(steps));
}
BENCHMARK(BM_EngineLoop)
    ->ArgNames({"requests", "metrics"})
    ->ArgsProduct({{16, 256}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace folio

BENCHMARK_MAIN();
