#include "scheduler/kvsim/simulation.h"

#include <algorithm>
#include <memory>
#include <random>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "scheduler/reservation_space.h"
#include "scheduler/scheduler.h"
#include "scheduler/simulated_worker.h"

namespace folio::kvsim {

SimulatedWorker::Options WorkerOptionsFor(const SchedulerConfig& config,
                                          const SimulationOptions& options) {
  SimulatedWorker::Options wo;
  wo.block_size = config.block_size;
  wo.num_device_blocks = config.num_device_blocks;
  wo.num_host_blocks = config.num_host_blocks;
  wo.seed = options.seed;
  wo.verify_kv = options.verify_kv;
  return wo;
}

absl::StatusOr<SimulationResult> Simulate(const Trace& trace, const SimulationOptions& options,
                                          ReservationPolicy policy, const SamplingParams& fanout) {
  const int32_t paged_blocks = static_cast<int32_t>(options.token_slots / options.block_size);
  std::unique_ptr<ContiguousSlotSpace> space;
  SchedulerConfig config;
  config.block_size = options.block_size;
  config.max_model_len = options.max_model_len;
  config.max_num_seqs = options.max_num_seqs;
  config.max_num_batched_tokens = options.max_num_batched_tokens;
  config.enable_prefix_caching = false;  // random prompts: nothing to hit
  config.reservation = policy;
  config.check_invariants = false;  // the worker's KV check covers the mapping
  // The managers are compared on the same pool: none keeps an admission
  // watermark back, so a request of max_model_len tokens fits every policy.
  config.watermark = 0.0;
  if (policy == ReservationPolicy::kNone) {
    config.num_device_blocks = paged_blocks;
    // Multi-sequence requests swap when preempted; give them room to.
    config.num_host_blocks = paged_blocks;
  } else {
    // The contiguous slot space is the real limit; the paged pool only
    // mirrors the reservations, so give it room for rounding up.
    space = std::make_unique<ContiguousSlotSpace>(options.token_slots);
    config.reservation_space = space.get();
    config.num_device_blocks = paged_blocks + options.max_num_seqs + 1;
  }
  absl::StatusOr<std::unique_ptr<Scheduler>> created = Scheduler::Create(config);
  if (!created.ok()) return created.status();
  Scheduler& scheduler = **created;

  SimulatedWorker worker(WorkerOptionsFor(config, options));

  std::mt19937_64 rng(options.seed ^ 0x6b76'73696dULL);
  for (size_t i = 0; i < trace.requests.size(); ++i) {
    const TraceRequest& t = trace.requests[i];
    RequestSpec spec;
    spec.id = static_cast<RequestId>(i);
    spec.prompt.resize(t.prompt_len);
    for (TokenId& tok : spec.prompt) tok = static_cast<TokenId>(rng() % 32000);
    spec.sampling = fanout;
    spec.sampling.max_tokens = t.output_len;
    spec.sampling.ignore_eos = true;  // the trace fixes every output length
    spec.expected_output_len = t.output_len;
    if (absl::Status s = scheduler.AddRequest(std::move(spec)); !s.ok()) return s;
  }

  SimulationResult result;
  double batch_requests = 0;  // over saturated steps
  double batch_sequences = 0;
  double batch_requests_all = 0;
  while (scheduler.HasUnfinishedRequests()) {
    StepPlan plan = scheduler.Schedule();
    // The batch: requests with work in this step.
    absl::flat_hash_set<SequenceId> scheduled;
    for (const ScheduledSequence& s : plan.scheduled) scheduled.insert(s.seq_id);
    int32_t requests_in_step = 0;
    for (const Request* r : scheduler.RunningRequests()) {
      for (const auto& seq : r->seqs) {
        if (scheduled.contains(seq->id())) {
          ++requests_in_step;
          break;
        }
      }
    }
    batch_requests_all += requests_in_step;
    if (scheduler.num_waiting() + scheduler.num_swapped() > 0) {
      ++result.saturated_steps;
      batch_requests += requests_in_step;
      batch_sequences += static_cast<double>(plan.scheduled.size());
    }
    absl::StatusOr<StepResult> executed = worker.Execute(plan);
    if (!executed.ok()) return executed.status();
    absl::StatusOr<std::vector<RequestOutput>> outputs = scheduler.Update(*executed);
    if (!outputs.ok()) return outputs.status();
    for (const RequestOutput& out : *outputs) {
      if (out.error.empty()) continue;
      if (result.failed_requests++ == 0) result.first_error = out.error;
    }
    // Memory is measured at the end of each step, as the batch stands.
    int64_t head_claim = 0;
    if (const Request* head = scheduler.NextWaiting(); head != nullptr) {
      head_claim = static_cast<int64_t>(scheduler.ReservationFor(*head)) * scheduler.SequenceSlots(*head);
    }
    AccountStep(scheduler, space.get(), head_claim, result.memory);
    AccountSharing(scheduler, result.sharing);
    ++result.steps;
    if (result.steps > 50'000'000) return absl::InternalError("simulation does not terminate");
  }
  const double saturated = static_cast<double>(std::max<int64_t>(1, result.saturated_steps));
  result.mean_batch_requests = batch_requests / saturated;
  result.mean_batch_sequences = batch_sequences / saturated;
  result.mean_batch_requests_all_steps =
      result.steps > 0 ? batch_requests_all / static_cast<double>(result.steps) : 0.0;
  result.preemptions_recompute = scheduler.stats().num_preemptions_recompute;
  result.preemptions_swap = scheduler.stats().num_preemptions_swap;
  result.generated_tokens = scheduler.stats().num_generation_tokens;
  return result;
}

}  // namespace folio::kvsim
