#ifndef FOLIO_SCHEDULER_SERVER_SCHEDULER_METRICS_H_
#define FOLIO_SCHEDULER_SERVER_SCHEDULER_METRICS_H_

// folio-scheduler's Prometheus metrics (names fixed by DESIGN.md; every
// series carries model="<served model name>"; docs/operations.md lists them
// with their meaning):
//
//   folio_kv_cache_blocks_total{pool=device|host}        gauge
//   folio_kv_cache_blocks_used{pool}                      gauge
//   folio_kv_cache_usage_ratio{pool}                      gauge, used / total
//   folio_kv_cache_token_usage_ratio                      gauge, device pool
//   folio_kv_cache_fragmentation_ratio                    gauge, device pool
//   folio_requests_running / _waiting / _swapped          gauges
//   folio_preemptions_total{mode=swap|recompute}          counter
//   folio_worker_failures_total                           counter: worker group
//                         failures (a rank died, hung or failed a health check)
//   folio_kv_cache_window_released_blocks_total           counter: device blocks
//                         given back as they fell out of a sliding window
//   folio_prefix_cache_queries_total / _hits_total        counters, in tokens
//   folio_prompt_tokens_total / folio_generation_tokens_total   counters
//   folio_request_success_total{finish_reason}            counter
//   folio_time_to_first_token_seconds, folio_inter_token_latency_seconds,
//   folio_e2e_request_latency_seconds, folio_request_queue_time_seconds,
//   folio_step_duration_seconds, folio_step_tokens        histograms
//   folio_build_info{version,block_size,num_device_blocks,num_host_blocks,
//                    tensor_parallel_size,kv_cache_dtype} gauge, always 1
//
// Token usage and fragmentation look at the device blocks in use: their
// token slots (used blocks x block_size) either hold a token's KV or are
// the unfilled tail of a sequence's last block(s). token_usage = tokens held
// / slots; fragmentation = unfilled slots / slots = 1 - token_usage (both 0
// while no block is in use). Block usage counts blocks, token usage counts
// what is in them.
//
// Thread-compatible: the engine thread calls every Record*/Flush method;
// scrapes read the underlying prometheus-cpp metrics concurrently (atomics).
// Cost: a step's Record* calls set the gauges that changed and bump the
// counters that grew (atomics); per-request latencies go to local bucket
// counts. Every Options::refresh_interval_s of step time (1 ms; on a GPU
// that is every step) the token usage walks the running sequences and
// Flush publishes the local buckets, so those lag the other series by at
// most that; when the engine goes idle everything is published at once.

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/metrics_server.h"
#include "scheduler/scheduler.h"
#include "scheduler/sequence.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
}  // namespace prometheus

namespace folio {

class SchedulerMetrics {
 public:
  struct Options {
    std::string model_name;
    int32_t block_size = 16;
    int32_t num_device_blocks = 0;
    int32_t num_host_blocks = 0;
    int32_t tensor_parallel_size = 1;
    // What the KV cache stores ("float32", "int8", ...); empty = not reported.
    std::string kv_cache_dtype;
    // Bytes of one KV block over all ranks (the host tier's byte counters); 0 = unknown.
    uint64_t block_bytes = 0;
    // Token usage and fragmentation (a walk over the running sequences) and
    // the latency histograms (gathered locally) are refreshed at most once
    // per this much step time (seconds), and whenever the engine goes idle:
    // on a GPU every step, on a fast scheduler-only loop every few dozen
    // steps — far finer than any scrape interval. 0 = every step.
    double refresh_interval_s = 0.001;
  };

  // Registers every family in `registry` (which must outlive this object)
  // and creates every series, so all exist from the first scrape.
  SchedulerMetrics(prometheus::Registry& registry, const Options& options);
  SchedulerMetrics(const SchedulerMetrics&) = delete;
  SchedulerMetrics& operator=(const SchedulerMetrics&) = delete;
  ~SchedulerMetrics();

  // After a step's Update(): the gauges from the scheduler's state, the
  // counters from its stats (what grew since the last call), and the step's
  // scheduled tokens and duration.
  void RecordStep(const Scheduler& scheduler, int32_t num_scheduled_tokens, double step_seconds);
  // A request's first scheduled step, `seconds` after its submission.
  void RecordQueueTime(double seconds) { queue_time_.Observe(seconds); }
  // A request's first output token(s), `seconds` after submission.
  void RecordFirstToken(double seconds) { ttft_.Observe(seconds); }
  // A later output of a request, `seconds` after its previous one.
  void RecordInterToken(double seconds) { itl_.Observe(seconds); }
  // A request's end (its Finished message), `e2e_seconds` after submission.
  void RecordFinished(FinishReason reason, double e2e_seconds);
  void RecordWorkerFailure();
  // Publishes the latency observations gathered since the last publication
  // when `force` or refresh_interval_s of step time has passed. Call once
  // per step, after its outputs were delivered; force when no request is
  // left (the figures must not wait for a next step that may never come).
  void Flush(bool force);

  // Bucket boundaries (seconds, or tokens for step tokens).
  static const std::vector<double>& TimeToFirstTokenBuckets();
  static const std::vector<double>& InterTokenLatencyBuckets();
  static const std::vector<double>& E2eLatencyBuckets();
  static const std::vector<double>& QueueTimeBuckets();
  static const std::vector<double>& StepDurationBuckets();
  static const std::vector<double>& StepTokenBuckets();

 private:
  // A gauge and the value last set (engine thread): most gauges hold still
  // from one step to the next, and an unchanged one costs no atomic store.
  struct CachedGauge {
    prometheus::Gauge* gauge = nullptr;
    double value = 0.0;
    void Set(double v);
  };
  struct Pool {
    prometheus::Gauge* blocks_total;
    CachedGauge blocks_used;
    CachedGauge usage_ratio;
  };
  // Adds `now - *last` to `counter` when positive; *last = now.
  static void Advance(prometheus::Counter& counter, int64_t now, int64_t* last);
  // Advance for a count of KV blocks, adding their bytes to `bytes` too.
  void AdvanceBlocks(prometheus::Counter& blocks, prometheus::Counter& bytes, int64_t now,
                     int64_t* last) const;

  const int32_t block_size_;
  const uint64_t block_bytes_;  // over all ranks
  const double refresh_interval_;

  Pool device_{};
  Pool host_{};
  CachedGauge token_usage_;
  CachedGauge fragmentation_;
  CachedGauge running_;
  CachedGauge waiting_;
  CachedGauge swapped_;
  prometheus::Counter* preemptions_swap_ = nullptr;
  prometheus::Counter* preemptions_recompute_ = nullptr;
  prometheus::Counter* window_released_ = nullptr;
  prometheus::Counter* worker_failures_ = nullptr;
  prometheus::Counter* prefix_queries_ = nullptr;
  prometheus::Counter* prefix_hits_ = nullptr;
  prometheus::Counter* prefix_host_hits_ = nullptr;
  prometheus::Counter* blocks_to_host_ = nullptr;
  prometheus::Counter* blocks_from_host_ = nullptr;
  prometheus::Counter* bytes_to_host_ = nullptr;
  prometheus::Counter* bytes_from_host_ = nullptr;
  prometheus::Counter* blocks_over_budget_ = nullptr;
  prometheus::Counter* prompt_tokens_ = nullptr;
  prometheus::Counter* generation_tokens_ = nullptr;
  // By FinishReason value (kNone unused).
  std::array<prometheus::Counter*, 6> success_{};
  prometheus::Histogram* ttft_hist_ = nullptr;
  prometheus::Histogram* itl_hist_ = nullptr;
  prometheus::Histogram* e2e_hist_ = nullptr;
  prometheus::Histogram* queue_hist_ = nullptr;
  prometheus::Histogram* step_duration_hist_ = nullptr;
  prometheus::Histogram* step_tokens_hist_ = nullptr;

  // Engine thread only: observations not yet published, and the stats
  // already counted.
  LocalHistogram ttft_;
  LocalHistogram itl_;
  LocalHistogram e2e_;
  LocalHistogram queue_time_;
  SchedulerStats last_stats_;
  KvCacheManager::PrefixCacheStats last_prefix_;
  double since_token_usage_;  // step time since the last walk
  double since_flush_ = 0.0;  // step time since the last publication
};

}  // namespace folio

#endif  // FOLIO_SCHEDULER_SERVER_SCHEDULER_METRICS_H_
