#ifndef FOLIO_WORKER_WORKER_METRICS_H_
#define FOLIO_WORKER_WORKER_METRICS_H_

// folio-worker's Prometheus metrics (names fixed by DESIGN.md), each series
// labelled model="<served model name>" and rank="<tensor-parallel rank>":
//
//   folio_worker_step_seconds                    histogram: one Step, plan in
//                                                to result out (cache ops,
//                                                forward, sampling)
//   folio_worker_allreduce_seconds               histogram: the step's time in
//                                                collectives
//   folio_worker_swap_bytes_total{direction=in|out}   counter: KV bytes this
//                                                rank copied host->device (in)
//                                                and device->host (out)
//   folio_worker_steps_total{kind=decode|prompt}      counter: the CPU
//                                                worker's profiled steps
//                                                (decode: one token a sequence)
//   folio_worker_step_part_seconds_total{kind,part}   counter: their time by
//                                                part of the forward pass
//                                                (worker/step_profile.h: qkv_gemm,
//                                                attention, ...); part/steps =
//                                                what `folio run --timing` prints
//
// The series exist once Bind() has named them (the worker learns its model
// and rank in Initialize); before that the endpoint serves no folio series.
//
// Thread-safety: Bind happens-before every RecordStep (WorkerService orders
// them through its mutex); RecordStep is called by one thread at a time.
// Scrapes read concurrently (prometheus-cpp's atomics).

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "worker/step_profile.h"

namespace prometheus {
class Counter;
class Histogram;
class Registry;
}  // namespace prometheus

namespace folio {

class WorkerMetrics {
 public:
  // `registry` must outlive this object.
  explicit WorkerMetrics(prometheus::Registry& registry);
  WorkerMetrics(const WorkerMetrics&) = delete;
  WorkerMetrics& operator=(const WorkerMetrics&) = delete;

  // Creates the series for `model` and `rank`. Later calls do nothing.
  void Bind(const std::string& model, int rank);
  bool bound() const { return step_ != nullptr; }

  // One step's figures. No-op before Bind.
  void RecordStep(double step_seconds, double allreduce_seconds, int64_t swap_in_bytes,
                  int64_t swap_out_bytes);

  // Adds what `profile` (cumulative sums) gained since the last call to
  // the step and step-part counters. No-op before Bind.
  void RecordStepParts(const StepProfile& profile);

  static const std::vector<double>& StepBuckets();
  static const std::vector<double>& AllReduceBuckets();

 private:
  prometheus::Registry& registry_;
  prometheus::Histogram* step_ = nullptr;
  prometheus::Histogram* allreduce_ = nullptr;
  prometheus::Counter* swap_in_ = nullptr;
  prometheus::Counter* swap_out_ = nullptr;
  // By kind (0 decode, 1 prompt): the steps, and seconds by StepPart.
  static constexpr int kKinds = 2;
  static constexpr int kParts = static_cast<int>(StepPart::kCount);
  std::array<prometheus::Counter*, kKinds> steps_{};
  std::array<std::array<prometheus::Counter*, kParts>, kKinds> parts_{};
  StepProfile reported_;  // the sums already added to the counters
};

}  // namespace folio

#endif  // FOLIO_WORKER_WORKER_METRICS_H_
