#ifndef FOLIO_SCHEDULER_SCHEDULER_H_
#define FOLIO_SCHEDULER_SCHEDULER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/step_plan.h"
#include "scheduler/kv_cache_manager.h"
#include "scheduler/request.h"
#include "scheduler/request_output.h"
#include "scheduler/request_queue.h"
#include "scheduler/scheduler_config.h"

namespace folio {

struct SchedulerStats {
  int64_t num_steps = 0;
  int64_t num_preemptions_recompute = 0;
  int64_t num_preemptions_swap = 0;
  int64_t num_worker_losses = 0;  // RequeueAfterWorkerLoss calls
  int64_t num_prompt_tokens = 0;      // prompt tokens of admitted requests
  int64_t num_generation_tokens = 0;  // tokens appended to sequences
  // Blocks given back because they fell out of every query's sliding window.
  int64_t num_window_released_blocks = 0;
};

// The iteration-level scheduler (Orca-style continuous batching over paged
// KV, vLLM V1-style token budget). Each step:
//   plan = Schedule();  ...workers run plan...;  outputs = Update(result);
// Schedule() decides which sequences run and how many tokens each computes,
// allocating blocks and preempting as needed; Update() takes the sampled
// tokens, forks, frees and applies stop conditions.
//
// Only the scheduler decides: workers execute the plan verbatim.
// Thread-compatible: the engine loop calls everything from one thread.
class Scheduler {
 public:
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(const SchedulerConfig& config);
  // The block manager's options that `config` gives.
  static KvCacheManager::Options KvCacheOptions(const SchedulerConfig& config);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. INVALID_ARGUMENT, naming the field, for bad input
  // (best_of / beam_width above max_parallel_sequences, max_num_seqs or
  // max_num_batched_tokens included: such a request could never run);
  // ALREADY_EXISTS for a duplicate id. A request that can never fit is
  // accepted and finishes with an error at the next step, without blocking
  // anyone.
  absl::Status AddRequest(RequestSpec spec);

  // Ends a request wherever it is and frees its blocks; its final output
  // comes with the next Update(). False when the id is unknown (finished).
  bool Abort(RequestId id);

  // Finishes one sequence (output index `index`) of a request that streams
  // its sequences (n == best_of, no beam search) with kStop and frees its
  // blocks; the others go on (stopping the last finishes the request). For
  // stop strings, which the engine matches on the text. Its final delta
  // comes with the next Update(). False when there is no such live sequence
  // (finished meanwhile) or the request ranks its sequences.
  bool StopSequence(RequestId id, int32_t index);

  // The workers lost every block's contents (a rank died or hung, mid-step
  // or idle). Every running or swapped request is preempted by recompute: its
  // tokens stay, its KV is computed again, and it resumes from the front of
  // the queue -- unless this is its (max_requeues + 1)-th loss: then it
  // finishes with kError and `cause`. The step in flight, if any, is dropped
  // (no Update() follows it) and the prefix cache forgets every block.
  // Finished requests' outputs come from TakePendingOutputs().
  void RequeueAfterWorkerLoss(int32_t max_requeues, const std::string& cause);
  // The final outputs of requests ended between steps (aborts, requeue
  // failures), for an engine that is not stepping (Update() returns them
  // otherwise). REQUIRES: no step awaiting its Update().
  std::vector<RequestOutput> TakePendingOutputs();

  // REQUIRES: every Schedule() is followed by Update() before the next one.
  StepPlan Schedule();
  // `result` must carry samples for every sequence the last plan asked to
  // sample; anything else is an internal error (a broken worker).
  absl::StatusOr<std::vector<RequestOutput>> Update(const StepResult& result);

  // True while a request is unfinished or a final output (an abort between
  // steps) still waits for the next Update(): an engine loop stepping while
  // this holds delivers every output, even after the last request is aborted.
  bool HasUnfinishedRequests() const { return !requests_.empty() || !pending_outputs_.empty(); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  // Tokens the waiting requests must compute once admitted (their prompts,
  // and the outputs of recompute-preempted ones): what an overload bound counts.
  int64_t num_waiting_tokens() const { return num_waiting_tokens_; }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_swapped() const { return static_cast<int32_t>(swapped_.size()); }
  // Live sequences of running requests (what max_num_seqs bounds).
  int32_t num_running_sequences() const;
  const SchedulerStats& stats() const { return stats_; }
  const KvCacheManager& kv_cache() const { return kv_; }
  const SchedulerConfig& config() const { return config_; }
  // Tokens whose KV is held on the device (for token-usage metrics).
  int64_t num_device_tokens() const;
  // Device token slots that running sequences hold but have not filled: the
  // unfilled tail of each block table (a tail block shared by k tables
  // counts 1/k from each, so every slot counts once). With the device
  // pool's used blocks x block_size it gives the token-usage and
  // fragmentation metrics. O(running sequences).
  double num_unfilled_device_slots() const;
  // The request, or null once finished. For inspection by tests and the simulator.
  const Request* FindRequest(RequestId id) const;
  // Requests currently running, in scheduling order.
  std::vector<const Request*> RunningRequests() const;
  // The request admission looks at next, or null when none waits.
  const Request* NextWaiting() const { return waiting_.empty() ? nullptr : waiting_.front(); }
  // Token slots per sequence the reservation policy claims for `r` (0 = on demand).
  int32_t ReservationFor(const Request& r) const;
  // Sequences `r` occupies against max_num_seqs (all its parallel ones).
  int32_t SequenceSlots(const Request& r) const;

  // The KV invariants over every live sequence (see KvCacheManager).
  absl::Status CheckInvariants() const;

 private:
  explicit Scheduler(const SchedulerConfig& config);

  struct Scheduled {
    Sequence* seq;
    Request* request;
    SequenceId seq_id;  // Update() matches samples without touching seq
    int32_t num_tokens;
    SampleMode mode;
    bool prompt_logprobs;  // ScheduledSequence::prompt_logprobs
    int32_t num_samples;
  };

  // Schedule() parts.
  void ScheduleRunning(StepPlan& plan, int32_t& budget, bool& preempted);
  void ScheduleSwapped(StepPlan& plan, int32_t& budget, int32_t& seq_slots);
  // whole_batch (static batching, into an empty engine): admit every request
  // that fits, beyond this step's token budget; their prompts run next steps.
  void ScheduleWaiting(StepPlan& plan, int32_t& budget, int32_t& seq_slots, bool whole_batch);
  // Picks this step's token counts for `r`'s sequences; false = nothing fits.
  bool PlanTokens(const Request& r, int32_t budget, std::vector<int32_t>& counts,
                  bool& sample) const;
  // Allocates and records the work; REQUIRES the blocks are available.
  // With `may_fail` (single-sequence requests only), returns false instead,
  // having changed nothing, when they are not.
  bool Commit(Request& r, const std::vector<int32_t>& counts, bool sample, StepPlan& plan,
              int32_t& budget, bool may_fail = false);
  AllocStatus CheckAdmission(Request& r, std::string* why);
  void Preempt(Request& victim, StepPlan& plan);
  // Preemption by recompute of `r` (out of the running or swapped queue):
  // frees its blocks, requeues it.
  void RequeueForRecompute(Request& r);
  // The plan entry of work just committed (in plan order); advances the
  // sequence's computed tokens.
  void EmitPlanEntry(const Scheduled& s, StepPlan& plan);

  // Update() parts (scheduler_update.cc).
  struct SampledSequence {
    Request* request;
    Sequence* seq;
    const SequenceSamples* samples;
  };
  void ApplySamples(Request& r, std::span<const SampledSequence> s, RequestOutput& out);
  void ApplyBeamStep(Request& r, std::span<const SampledSequence> s);
  FinishReason StopReason(const Request& r, const Sequence& seq) const;
  void RetireSequence(Request& r, size_t live_index, FinishReason reason);
  void DropSequence(Sequence& seq);
  // Ends `r` (destroying it) and completes its final output in `out`
  // (which may already hold this step's deltas).
  void FinishRequest(Request& r, FinishReason reason, std::string error, RequestOutput& out);
  static bool StreamsDeltas(const Request& r);
  static void AppendDeltas(std::span<Sequence* const> seqs, RequestOutput& out);
  static void AppendRanked(Request& r, RequestOutput& out);
  void FillUsage(const Request& r, RequestOutput& out) const;
  // Stores this step's scored prompt tokens in their requests.
  absl::Status ApplyPromptLogprobs(const StepResult& result);
  // Moves a completely scored prompt into the request's first output.
  void AttachPromptLogprobs(Request& r, RequestOutput& out);
  std::unique_ptr<Sequence> ForkSequence(Request& r, const Sequence& parent);

  std::vector<const Sequence*> AllLiveSequences() const;
  void MaybeCheckInvariants() const;
  // waiting_.Insert and its removals, keeping num_waiting_tokens_.
  void PushWaiting(Request& r);
  void CountLeavingWaiting(Request& r);

  // Const after construction.
  const SchedulerConfig config_;

  KvCacheManager kv_;
  absl::flat_hash_map<RequestId, std::unique_ptr<Request>> requests_;
  absl::flat_hash_map<SequenceId, Sequence*> sequences_;  // live, by id
  RequestQueue waiting_;
  int64_t num_waiting_tokens_ = 0;
  RequestQueue running_;
  RequestQueue swapped_;
  std::vector<Request*> running_snapshot_;  // ScheduleRunning's scratch, reused
  std::vector<Scheduled> scheduled_;  // this step's work, in plan order
  size_t last_num_scheduled_ = 0;     // sizes the next plan
  int32_t num_scoring_ = 0;  // of scheduled_, the entries that score prompt tokens
  // Live requests that asked for prompt_logprobs and have not had them
  // sent: while 0, no step reads a request's prompt-scoring fields.
  int32_t num_prompt_logprob_requests_ = 0;
  std::vector<SampledSequence> sampled_;  // Update()'s scratch, reused
  std::vector<SequenceId> pending_finished_ids_;  // for the next plan
  std::vector<RequestOutput> pending_outputs_;    // finished outside a step
  SchedulerStats stats_;
  uint64_t next_arrival_ = 0;
  uint64_t next_step_ = 0;
  SequenceId next_seq_id_ = 0;
  bool awaiting_update_ = false;
};

}  // namespace folio

#endif  // FOLIO_SCHEDULER_SCHEDULER_H_
