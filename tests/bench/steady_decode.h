#ifndef FOLIO_TESTS_BENCH_STEADY_DECODE_H_
#define FOLIO_TESTS_BENCH_STEADY_DECODE_H_

// A scheduler in steady decode for the benchmarks: N running sequences with
// 64-token prompts and staggered output lengths, each finished request
// replaced at once, rank 0's answer faked cheaply so the harness does not
// dominate the figure. Shared by folio_bench_scheduler and folio_bench_metrics.

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "common/check.h"
#include "scheduler/scheduler.h"

namespace folio::bench {

class SteadyDecode {
 public:
  static constexpr int32_t kPromptLen = 64;
  static constexpr int32_t kMaxOutput = 512;

  // Device blocks the pool needs for `num_seqs` sequences at their longest.
  static int32_t DeviceBlocksFor(int32_t num_seqs) {
    return num_seqs * ((kPromptLen + kMaxOutput) / 16 + 2) + 64;
  }

  explicit SteadyDecode(int32_t num_seqs) : rng_(42) {
    SchedulerConfig config;
    config.block_size = 16;
    config.num_device_blocks = DeviceBlocksFor(num_seqs);
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

  // One full iteration; `after_update(plan, outputs)` runs before finished
  // requests are replaced. Returns the number of scheduled sequences.
  template <typename AfterUpdate>
  size_t Step(AfterUpdate&& after_update) {
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
      out.tokens.assign(1, {static_cast<TokenId>(rng_() % 32000), -1.0f, {}});
    }
    result_.samples.resize(n);
    auto outputs = scheduler_->Update(result_);
    FOLIO_CHECK(outputs.ok());
    after_update(plan, *outputs);
    for (const RequestOutput& o : *outputs) {
      if (o.finished) AddRequest();
    }
    return plan.scheduled.size();
  }
  size_t Step() {
    return Step([](const StepPlan&, const std::vector<RequestOutput>&) {});
  }

  const Scheduler& scheduler() const { return *scheduler_; }

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

  std::minstd_rand rng_;  // cheap: the harness must not dominate the figure
  std::unique_ptr<Scheduler> scheduler_;
  StepResult result_;
  RequestId next_id_ = 0;
};

}  // namespace folio::bench

#endif  // FOLIO_TESTS_BENCH_STEADY_DECODE_H_
