#include "worker/worker_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <string>

namespace folio {

// A step: a tiny decode batch (~100 us) to a long prefill (seconds).
const std::vector<double>& WorkerMetrics::StepBuckets() {
  static const std::vector<double> b = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                        0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                        1.0,    2.5,     5.0,    10.0,  30.0};
  return b;
}

// Collectives of one step: zero (one rank) or microseconds over NVLink to
// hundreds of milliseconds over TCP.
const std::vector<double>& WorkerMetrics::AllReduceBuckets() {
  static const std::vector<double> b = {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005,
                                        0.001,   0.0025,   0.005,   0.01,   0.025,   0.05,
                                        0.1,     0.25,     0.5,     1.0,    2.5,     5.0};
  return b;
}

WorkerMetrics::WorkerMetrics(prometheus::Registry& registry) : registry_(registry) {}

void WorkerMetrics::Bind(const std::string& model, int rank) {
  if (bound()) return;
  const prometheus::Labels labels = {{"model", model}, {"rank", std::to_string(rank)}};
  allreduce_ = &prometheus::BuildHistogram()
                    .Name("folio_worker_allreduce_seconds")
                    .Help("Time one step spent in collectives (all-reduce, gathers).")
                    .Register(registry_)
                    .Add(labels, AllReduceBuckets());
  auto& swap = prometheus::BuildCounter()
                   .Name("folio_worker_swap_bytes_total")
                   .Help("KV cache bytes this rank swapped: in = host to device, out = device to host.")
                   .Register(registry_);
  prometheus::Labels in = labels, out = labels;
  in["direction"] = "in";
  out["direction"] = "out";
  swap_in_ = &swap.Add(in);
  swap_out_ = &swap.Add(out);
  auto& steps = prometheus::BuildCounter()
                    .Name("folio_worker_steps_total")
                    .Help("Steps the CPU worker profiled by part: decode (one token a sequence) or "
                          "prompt (prefill or mixed).")
                    .Register(registry_);
  auto& parts = prometheus::BuildCounter()
                    .Name("folio_worker_step_part_seconds_total")
                    .Help("The CPU worker's step time by part of the forward pass and kind of step.")
                    .Register(registry_);
  for (int k = 0; k < kKinds; ++k) {
    prometheus::Labels kind = labels;
    kind["kind"] = k == 0 ? "decode" : "prompt";
    steps_[k] = &steps.Add(kind);
    for (int p = 0; p < kParts; ++p) {
      prometheus::Labels part = kind;
      std::string name(StepPartName(static_cast<StepPart>(p)));
      for (char& c : name) c = (c == ' ' || c == '-') ? '_' : c;  // "rms norm" -> rms_norm
      part["part"] = name;
      parts_[k][p] = &parts.Add(part);
    }
  }
  // Last: bound() turns true once every series exists.
  step_ = &prometheus::BuildHistogram()
               .Name("folio_worker_step_seconds")
               .Help("One step on this rank: cache operations, forward pass, sampling.")
               .Register(registry_)
               .Add(labels, StepBuckets());
}

void WorkerMetrics::RecordStep(double step_seconds, double allreduce_seconds,
                               int64_t swap_in_bytes, int64_t swap_out_bytes) {
  if (!bound()) return;
  step_->Observe(step_seconds);
  allreduce_->Observe(allreduce_seconds);
  if (swap_in_bytes > 0) swap_in_->Increment(static_cast<double>(swap_in_bytes));
  if (swap_out_bytes > 0) swap_out_->Increment(static_cast<double>(swap_out_bytes));
}

void WorkerMetrics::RecordStepParts(const StepProfile& profile) {
  if (!bound()) return;
  const StepTimes* now[kKinds] = {&profile.decode, &profile.other};
  StepTimes* seen[kKinds] = {&reported_.decode, &reported_.other};
  for (int k = 0; k < kKinds; ++k) {
    if (now[k]->steps == seen[k]->steps) continue;
    steps_[k]->Increment(static_cast<double>(now[k]->steps - seen[k]->steps));
    for (int p = 0; p < kParts; ++p) {
      const int64_t nanos = now[k]->nanos[p] - seen[k]->nanos[p];
      if (nanos > 0) parts_[k][p]->Increment(1e-9 * static_cast<double>(nanos));
    }
    *seen[k] = *now[k];
  }
}

}  // namespace folio
