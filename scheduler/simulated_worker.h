#ifndef FOLIO_SCHEDULER_SIMULATED_WORKER_H_
#define FOLIO_SCHEDULER_SIMULATED_WORKER_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/plan_mirror.h"
#include "common/step_plan.h"

namespace folio {

// A stand-in for the worker ranks with the model replaced by a step counter,
// for the simulator, the benchmark and the tests. It keeps the same mirror a
// real worker keeps (tokens and block table per sequence, updated only from
// plans) and, with verify_kv on, a KV cache whose slots hold the token id and
// position written there. Every step it "attends": it checks that each
// scheduled sequence's cached slots hold exactly its tokens, so a wrong block
// mapping, a missed copy-on-write or a lost swap is caught at once, the way
// an incorrect KV mapping shows up as wrong output on a real model.
//
// Tokens are pseudo-random but a pure function of (seed, the sequence's
// tokens so far, sample index): a recomputed sequence repeats its tokens.
// Prompt log-probs (ScheduledSequence::prompt_logprobs) are likewise a pure
// function of the prompt prefix they score.
class SimulatedWorker {
 public:
  struct Options {
    int32_t block_size = 16;
    int32_t num_device_blocks = 0;
    int32_t num_host_blocks = 0;
    int32_t vocab_size = 32000;
    uint64_t seed = 0;
    bool verify_kv = true;
    // Sliding-window attention: a query at position q reads only positions
    // (q - sliding_window, q], as a windowed model's kernels do. 0 = all.
    int32_t sliding_window = 0;
    TokenId eos_token_id = -1;        // sampled with eos_probability when >= 0
    double eos_probability = 0.0;
    // Beam candidates' log-probs fall by up to this much per rank; a larger
    // spread lets one beam dominate (more sharing), a smaller one keeps
    // beams apart.
    double beam_logprob_spread = 1.0;
  };

  explicit SimulatedWorker(const Options& options);
  SimulatedWorker(const SimulatedWorker&) = delete;
  SimulatedWorker& operator=(const SimulatedWorker&) = delete;

  // Applies the plan (cache ops, mirror updates, KV writes and checks) and
  // returns rank 0's samples. An error means the plan was inconsistent.
  absl::StatusOr<StepResult> Execute(const StepPlan& plan);

  size_t num_mirrored_sequences() const { return mirror_.size(); }
  // The mirrored block table, or null when the sequence is not mirrored.
  const std::vector<BlockId>* MirrorBlockTable(SequenceId id) const;

 private:
  struct Slot {
    TokenId token = -1;
    int32_t position = -1;
  };

  absl::Status ApplyCopies(const std::vector<BlockCopy>& ops, std::vector<Slot>& from,
                           std::vector<Slot>& to, int32_t from_blocks, int32_t to_blocks,
                           const char* what);
  absl::Status Compute(const ScheduledSequence& work, const MirroredSequence& m);
  std::vector<SampledToken> Sample(const ScheduledSequence& work, const MirroredSequence& m) const;
  // Pseudo log-probs of the prompt tokens the chunk predicts, a pure function
  // of (seed, the prompt up to each scored token), like Sample's tokens.
  PromptLogprobs ScorePrompt(const ScheduledSequence& work, const MirroredSequence& m) const;
  uint64_t ContentHash(const MirroredSequence& m) const;

  const Options options_;
  std::vector<Slot> device_;  // num_device_blocks * block_size slots
  std::vector<Slot> host_;
  PlanMirror mirror_;
};

}  // namespace folio

#endif  // FOLIO_SCHEDULER_SIMULATED_WORKER_H_
