#include "scheduler/server/scheduler_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <string>

#ifndef FOLIO_VERSION
#define FOLIO_VERSION "unknown"
#endif

namespace folio {
namespace {

using prometheus::Labels;

}  // namespace

// Bucket edges for LLM serving. Time to first token spans a cached short
// prompt on a GPU (1 ms) to a long prompt queued behind a full batch
// (minutes); inter-token latency a fast decode (1 ms) to a stalled one;
// end-to-end latency a one-token request to a long generation. The upper
// ranges follow vLLM's (2560 s, 80 s, 7680 s) so dashboards compare; the
// lower ones go further down, for small models and CPU serving.
const std::vector<double>& SchedulerMetrics::TimeToFirstTokenBuckets() {
  static const std::vector<double> b = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08,
                                        0.1,   0.25,   0.5,   0.75, 1.0,  2.5,  5.0,  7.5,
                                        10.0,  20.0,   40.0,  80.0, 160.0, 640.0, 2560.0};
  return b;
}

const std::vector<double>& SchedulerMetrics::InterTokenLatencyBuckets() {
  static const std::vector<double> b = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075,
                                        0.1,   0.15,   0.2,   0.3,  0.4,   0.5,  0.75,
                                        1.0,   2.5,    5.0,   7.5,  10.0,  20.0, 40.0, 80.0};
  return b;
}

const std::vector<double>& SchedulerMetrics::E2eLatencyBuckets() {
  static const std::vector<double> b = {0.01,  0.025, 0.05,  0.1,   0.3,   0.5,   0.8,   1.0,
                                        1.5,   2.0,   2.5,   5.0,   10.0,  15.0,  20.0,  30.0,
                                        40.0,  50.0,  60.0,  120.0, 240.0, 480.0, 960.0, 1920.0,
                                        7680.0};
  return b;
}

const std::vector<double>& SchedulerMetrics::QueueTimeBuckets() {
  static const std::vector<double> b = {0.0005, 0.001, 0.0025, 0.005, 0.01,  0.025, 0.05,
                                        0.1,    0.25,  0.5,    1.0,   2.5,   5.0,   10.0,
                                        20.0,   40.0,  80.0,   160.0, 320.0, 640.0, 1280.0,
                                        2560.0, 7680.0};
  return b;
}

// One engine iteration: from a tiny decode batch (~100 us) to a long
// prefill on a slow device (seconds).
const std::vector<double>& SchedulerMetrics::StepDurationBuckets() {
  static const std::vector<double> b = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                        0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                        1.0,    2.5,     5.0,    10.0,  30.0};
  return b;
}

// Tokens of one step: decode batches (1..max_num_seqs) and prefill chunks
// (up to max_num_batched_tokens), powers of two.
const std::vector<double>& SchedulerMetrics::StepTokenBuckets() {
  static const std::vector<double> b = {1,   2,   4,    8,    16,   32,   64,    128,
                                        256, 512, 1024, 2048, 4096, 8192, 16384, 32768};
  return b;
}

SchedulerMetrics::SchedulerMetrics(prometheus::Registry& registry, const Options& options)
    : block_size_(options.block_size),
      block_bytes_(options.block_bytes),
      refresh_interval_(options.refresh_interval_s),
      ttft_(TimeToFirstTokenBuckets()),
      itl_(InterTokenLatencyBuckets()),
      e2e_(E2eLatencyBuckets()),
      queue_time_(QueueTimeBuckets()),
      since_token_usage_(options.refresh_interval_s) {
  const std::string& model = options.model_name;
  auto gauge = [&](const std::string& name, const std::string& help) -> prometheus::Family<prometheus::Gauge>& {
    return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
  };
  auto counter = [&](const std::string& name, const std::string& help) -> prometheus::Family<prometheus::Counter>& {
    return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
  };
  auto histogram = [&](const std::string& name, const std::string& help,
                       const std::vector<double>& buckets) {
    return &prometheus::BuildHistogram().Name(name).Help(help).Register(registry).Add(
        {{"model", model}}, buckets);
  };

  auto& blocks_total = gauge("folio_kv_cache_blocks_total", "KV cache blocks in the pool.");
  auto& blocks_used = gauge("folio_kv_cache_blocks_used",
                            "KV cache blocks held by sequences (free cached blocks not counted).");
  auto& usage = gauge("folio_kv_cache_usage_ratio", "KV cache blocks used / total, 0..1.");
  for (auto [pool, name] : {std::pair{&device_, "device"}, std::pair{&host_, "host"}}) {
    const Labels labels = {{"model", model}, {"pool", name}};
    pool->blocks_total = &blocks_total.Add(labels);
    pool->blocks_used.gauge = &blocks_used.Add(labels);
    pool->usage_ratio.gauge = &usage.Add(labels);
  }
  device_.blocks_total->Set(options.num_device_blocks);
  host_.blocks_total->Set(options.num_host_blocks);
  token_usage_.gauge = &gauge("folio_kv_cache_token_usage_ratio",
                        "Tokens held / token slots of the device blocks in use, 0..1.")
                      .Add({{"model", model}});
  fragmentation_.gauge = &gauge("folio_kv_cache_fragmentation_ratio",
                          "Unfilled token slots / token slots of the device blocks in use, 0..1 "
                          "(internal fragmentation; 1 - token usage).")
                        .Add({{"model", model}});
  running_.gauge = &gauge("folio_requests_running", "Requests in the running batch.").Add({{"model", model}});
  waiting_.gauge = &gauge("folio_requests_waiting", "Requests waiting for admission (new or preempted by recompute).")
                  .Add({{"model", model}});
  swapped_.gauge = &gauge("folio_requests_swapped", "Requests swapped out to the host pool.")
                  .Add({{"model", model}});
  auto& preemptions = counter("folio_preemptions_total", "Requests preempted, by mode.");
  preemptions_swap_ = &preemptions.Add({{"model", model}, {"mode", "swap"}});
  preemptions_recompute_ = &preemptions.Add({{"model", model}, {"mode", "recompute"}});
  worker_failures_ = &counter("folio_worker_failures_total",
                              "Worker group failures: a rank died, hung past its step "
                              "deadline or failed an idle health check.")
                          .Add({{"model", model}});
  window_released_ = &counter("folio_kv_cache_window_released_blocks_total",
                              "Device KV blocks given back because they fell out of every "
                              "query's sliding window (models windowed on every layer).")
                          .Add({{"model", model}});
  prefix_queries_ = &counter("folio_prefix_cache_queries_total",
                             "Prompt tokens looked up in the prefix cache.")
                         .Add({{"model", model}});
  prefix_hits_ = &counter("folio_prefix_cache_hits_total",
                          "Prompt tokens found in the prefix cache.")
                      .Add({{"model", model}});
  prefix_host_hits_ = &counter("folio_prefix_cache_host_hits_total",
                               "Prompt tokens found in the prefix cache's host tier (of the "
                               "hits; swapped back in, not computed).")
                           .Add({{"model", model}});
  auto& tier_blocks = counter("folio_prefix_cache_host_tier_blocks_total",
                              "Cached KV blocks moved by the prefix cache's host tier: to_host "
                              "(copied out as the device evicted them), from_host (prefix "
                              "hits swapped back in).");
  blocks_to_host_ = &tier_blocks.Add({{"model", model}, {"direction", "to_host"}});
  blocks_from_host_ = &tier_blocks.Add({{"model", model}, {"direction", "from_host"}});
  auto& tier_bytes = counter("folio_prefix_cache_host_tier_bytes_total",
                             "Bytes those blocks moved, over all ranks (rate() is the tier's "
                             "transfer bandwidth).");
  bytes_to_host_ = &tier_bytes.Add({{"model", model}, {"direction", "to_host"}});
  bytes_from_host_ = &tier_bytes.Add({{"model", model}, {"direction", "from_host"}});
  blocks_over_budget_ = &counter("folio_prefix_cache_host_tier_over_budget_blocks_total",
                                 "Cached blocks the host tier's per-step budget left out: "
                                 "evicted ones not copied, host hits computed again "
                                 "(--host-prefix-cache-step-mb).")
                             .Add({{"model", model}});
  prompt_tokens_ = &counter("folio_prompt_tokens_total", "Prompt tokens of admitted requests.")
                        .Add({{"model", model}});
  generation_tokens_ = &counter("folio_generation_tokens_total", "Tokens generated.")
                            .Add({{"model", model}});
  auto& success = counter("folio_request_success_total",
                          "Requests finished, by the finish reason of their first sequence.");
  for (FinishReason r : {FinishReason::kLength, FinishReason::kStop, FinishReason::kEos,
                         FinishReason::kAbort, FinishReason::kError}) {
    success_[static_cast<size_t>(r)] =
        &success.Add({{"model", model}, {"finish_reason", FinishReasonName(r)}});
  }
  ttft_hist_ = histogram("folio_time_to_first_token_seconds",
                         "Submission to the first output token.", TimeToFirstTokenBuckets());
  itl_hist_ = histogram("folio_inter_token_latency_seconds",
                        "Between consecutive outputs of a request.", InterTokenLatencyBuckets());
  e2e_hist_ = histogram("folio_e2e_request_latency_seconds",
                        "Submission to the end of the request.", E2eLatencyBuckets());
  queue_hist_ = histogram("folio_request_queue_time_seconds",
                          "Submission to the first scheduled step.", QueueTimeBuckets());
  step_duration_hist_ = histogram("folio_step_duration_seconds",
                                  "One engine step: schedule, workers, update.",
                                  StepDurationBuckets());
  step_tokens_hist_ = histogram("folio_step_tokens", "Tokens computed in one step.",
                                StepTokenBuckets());
  gauge("folio_build_info", "Build and KV cache configuration; always 1.")
      .Add({{"model", model},
            {"version", FOLIO_VERSION},
            {"block_size", std::to_string(options.block_size)},
            {"num_device_blocks", std::to_string(options.num_device_blocks)},
            {"num_host_blocks", std::to_string(options.num_host_blocks)},
            {"tensor_parallel_size", std::to_string(options.tensor_parallel_size)},
            {"kv_cache_dtype", options.kv_cache_dtype}})
      .Set(1);
}

SchedulerMetrics::~SchedulerMetrics() = default;

void SchedulerMetrics::CachedGauge::Set(double v) {
  if (v == value) return;
  value = v;
  gauge->Set(v);
}

void SchedulerMetrics::Advance(prometheus::Counter& counter, int64_t now, int64_t* last) {
  if (now > *last) counter.Increment(static_cast<double>(now - *last));
  *last = now;
}

void SchedulerMetrics::AdvanceBlocks(prometheus::Counter& blocks, prometheus::Counter& bytes,
                                     int64_t now, int64_t* last) const {
  if (now > *last) bytes.Increment(static_cast<double>((now - *last) * block_bytes_));
  Advance(blocks, now, last);
}

void SchedulerMetrics::RecordStep(const Scheduler& scheduler, int32_t num_scheduled_tokens,
                                  double step_seconds) {
  const KvCacheManager& kv = scheduler.kv_cache();
  const BlockPool& device = kv.device_pool();
  const BlockPool& host = kv.host_pool();
  const int32_t device_used = device.num_used_blocks();
  device_.blocks_used.Set(device_used);
  device_.usage_ratio.Set(device.num_blocks() > 0 ? double(device_used) / device.num_blocks() : 0.0);
  host_.blocks_used.Set(host.num_used_blocks());
  host_.usage_ratio.Set(host.num_blocks() > 0 ? double(host.num_used_blocks()) / host.num_blocks()
                                              : 0.0);
  // Token usage walks the running sequences: at most once per
  // refresh_interval_ of step time, and at once when blocks come into
  // use or all go back (so an idle engine always reads 0, exactly).
  since_token_usage_ += step_seconds;
  since_flush_ += step_seconds;
  if (device_used == 0) {
    token_usage_.Set(0.0);
    fragmentation_.Set(0.0);
    since_token_usage_ = refresh_interval_;
  } else if (since_token_usage_ >= refresh_interval_) {
    const double slots = static_cast<double>(device_used) * block_size_;
    const double unfilled = scheduler.num_unfilled_device_slots();
    token_usage_.Set((slots - unfilled) / slots);
    fragmentation_.Set(unfilled / slots);
    since_token_usage_ = 0.0;
  }
  running_.Set(scheduler.num_running());
  waiting_.Set(scheduler.num_waiting());
  swapped_.Set(scheduler.num_swapped());

  const SchedulerStats& stats = scheduler.stats();
  Advance(*preemptions_swap_, stats.num_preemptions_swap, &last_stats_.num_preemptions_swap);
  Advance(*preemptions_recompute_, stats.num_preemptions_recompute,
          &last_stats_.num_preemptions_recompute);
  Advance(*window_released_, stats.num_window_released_blocks,
          &last_stats_.num_window_released_blocks);
  Advance(*prompt_tokens_, stats.num_prompt_tokens, &last_stats_.num_prompt_tokens);
  Advance(*generation_tokens_, stats.num_generation_tokens, &last_stats_.num_generation_tokens);
  const KvCacheManager::PrefixCacheStats& prefix = kv.prefix_cache_stats();
  Advance(*prefix_queries_, prefix.queries, &last_prefix_.queries);
  Advance(*prefix_hits_, prefix.hits, &last_prefix_.hits);
  Advance(*prefix_host_hits_, prefix.host_hits, &last_prefix_.host_hits);
  AdvanceBlocks(*blocks_to_host_, *bytes_to_host_, prefix.blocks_to_host,
                &last_prefix_.blocks_to_host);
  AdvanceBlocks(*blocks_from_host_, *bytes_from_host_, prefix.blocks_from_host,
                &last_prefix_.blocks_from_host);
  Advance(*blocks_over_budget_, prefix.blocks_over_budget, &last_prefix_.blocks_over_budget);

  // One observation each per step: straight to the histogram (a bucket and
  // the sum), cheaper than publishing every bucket of a local copy.
  step_duration_hist_->Observe(step_seconds);
  step_tokens_hist_->Observe(num_scheduled_tokens);
}

void SchedulerMetrics::RecordWorkerFailure() { worker_failures_->Increment(); }

void SchedulerMetrics::RecordFinished(FinishReason reason, double e2e_seconds) {
  prometheus::Counter* c = success_[static_cast<size_t>(reason)];
  if (c == nullptr) c = success_[static_cast<size_t>(FinishReason::kAbort)];
  c->Increment();
  e2e_.Observe(e2e_seconds);
}

void SchedulerMetrics::Flush(bool force) {
  if (!force && since_flush_ < refresh_interval_) return;
  since_flush_ = 0.0;
  ttft_.Flush(*ttft_hist_);
  itl_.Flush(*itl_hist_);
  e2e_.Flush(*e2e_hist_);
  queue_time_.Flush(*queue_hist_);
}

}  // namespace folio
