#ifndef FOLIO_SCHEDULER_KVSIM_SIMULATION_H_
#define FOLIO_SCHEDULER_KVSIM_SIMULATION_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/sampling_params.h"
#include "scheduler/kvsim/memory_accounting.h"
#include "scheduler/kvsim/trace.h"
#include "scheduler/scheduler_config.h"
#include "scheduler/simulated_worker.h"

namespace folio::kvsim {

struct SimulationOptions {
  int64_t token_slots = 15700;  // the paper's OPT-13B pool on one A100-40GB
  int32_t block_size = 16;
  int32_t max_model_len = 2048;
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 2048;
  uint64_t seed = 0;
  bool verify_kv = true;  // the simulated worker checks every KV mapping
};

struct SimulationResult {
  MemoryBreakdown memory;
  SharingBreakdown sharing;
  // Requests (sequences) with work in a step, averaged over the saturated
  // steps: those where requests still wait, so memory bounds the batch. The
  // drain at the end, when the queue is empty, would measure the trace's
  // longest outputs instead of the memory manager.
  double mean_batch_requests = 0;
  double mean_batch_sequences = 0;
  int64_t saturated_steps = 0;
  double mean_batch_requests_all_steps = 0;
  int64_t steps = 0;
  int64_t preemptions_recompute = 0;
  int64_t preemptions_swap = 0;
  int64_t generated_tokens = 0;
  // Requests the scheduler ended with an error (never admissible under the
  // policy, e.g. a power-of-two reservation beyond the pool), and the first
  // such error.
  int64_t failed_requests = 0;
  std::string first_error;
};

// The simulated worker for a scheduler of `config`: its pools, the seed and
// the KV check.
SimulatedWorker::Options WorkerOptionsFor(const SchedulerConfig& config,
                                          const SimulationOptions& options);

// Replays `trace` through the real scheduler and block manager, all
// requests queued at the start, with a SimulatedWorker as the model: each
// step appends one token per running sequence. `fanout` sets n / beam width
// for every request (sharing experiments); plain sampling otherwise.
absl::StatusOr<SimulationResult> Simulate(const Trace& trace, const SimulationOptions& options,
                                          ReservationPolicy policy, const SamplingParams& fanout);

}  // namespace folio::kvsim

#endif  // FOLIO_SCHEDULER_KVSIM_SIMULATION_H_
