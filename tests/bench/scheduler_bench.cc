// Cost of one scheduler iteration — Schedule() + plan build + Update() — with
// N running decode sequences and prefix caching on. vLLM's Python scheduler
// spends ~2-2.5 ms per step; folio's budget is 50 us at 256 sequences (1% of
// a 5 ms GPU step). Figures go to docs/performance.md.

#include <benchmark/benchmark.h>

#include <memory>
#include <random>

#include "common/check.h"
#include "scheduler/scheduler.h"

namespace folio {
namespace {

constexpr int32_t kPromptLen = 64;
constexpr int32_t kMaxOutput = 512;

class SteadyDecode {
 public:
  explicit SteadyDecode(int32_t num_seqs) : num_seqs_(num_seqs), rng_(42) {
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
    // Warm up until every sequence decodes and finishing is staggered.
    for (int i = 0; i < kMaxOutput; ++i) Step();
  }

  // One full iteration; returns the number of scheduled sequences.
  size_t Step() {
    StepPlan plan = scheduler_->Schedule();
    // Rank 0's answer, rebuilt in place: the worker's allocations are not
    // the scheduler's cost.
    result_.step_id = plan.step_id;
    size_t n = 0;
    for (const ScheduledSequence& s : plan.scheduled) {
      if (s.sample_mode == SampleMode::kNone) continue;
      if (n == result_.samples.size()) result_.samples.emplace_back();
      SequenceSamples& out = result_.samples[n++];
      out.seq_id = s.seq_id;
      out.tokens.assign(1, {static_cast<TokenId>(rng_() % 32000), -1.0f});
    }
    result_.samples.resize(n);
    auto outputs = scheduler_->Update(result_);
    FOLIO_CHECK(outputs.ok());
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

  const int32_t num_seqs_;
  std::minstd_rand rng_;  // cheap: the harness must not dominate the figure
  std::unique_ptr<Scheduler> scheduler_;
  StepResult result_;
  RequestId next_id_ = 0;
};

void BM_SchedulerStep(benchmark::State& state) {
  SteadyDecode engine(static_cast<int32_t>(state.range(0)));
  size_t scheduled = 0;
  for (auto _ : state) scheduled += engine.Step();
  state.counters["seqs_per_step"] =
      benchmark::Counter(static_cast<double>(scheduled) / static_cast<double>(state.iterations()));
  state.counters["us_per_seq"] = benchmark::Counter(
      static_cast<double>(scheduled), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["us_per_seq"] = state.counters["us_per_seq"];
}
BENCHMARK(BM_SchedulerStep)->Arg(16)->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace folio

BENCHMARK_MAIN();
