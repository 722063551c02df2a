#ifndef FOLIO_COMMON_PLAN_MIRROR_H_
#define FOLIO_COMMON_PLAN_MIRROR_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/sampling_params.h"
#include "common/step_plan.h"

namespace folio {

// What a worker knows of one live sequence, learned only from plans.
struct MirroredSequence {
  RequestId request_id = 0;
  int32_t index = 0;  // position among its request's sequences
  int32_t num_prompt_tokens = 0;
  std::vector<TokenId> tokens;  // prompt + output, as far as computed or announced
  std::vector<BlockId> blocks;  // device block table
  SamplingParams sampling;

  int32_t num_output_tokens() const { return static_cast<int32_t>(tokens.size()) - num_prompt_tokens; }
};

// The worker side of the plan protocol (vLLM V1's worker block table): every
// rank keeps this mirror of the scheduler's sequences and block tables and
// updates it from each plan's new sequences and diffs. Any disagreement with
// the plan is an error: the scheduler and the worker have diverged.
//
// Thread-compatible.
class PlanMirror {
 public:
  PlanMirror(int32_t block_size, int32_t num_device_blocks);

  // Drops finished and preempted sequences, adds new ones, applies diffs.
  absl::Status ApplyMetadata(const StepPlan& plan);
  // Checks `work` against the mirror (tokens agree, the table covers them,
  // block ids lie in the pool) and appends the tokens it announces.
  absl::StatusOr<MirroredSequence*> ApplyScheduled(const ScheduledSequence& work);

  const MirroredSequence* Find(SequenceId id) const;
  size_t size() const { return seqs_.size(); }
  int32_t block_size() const { return block_size_; }

 private:
  const int32_t block_size_;
  const int32_t num_device_blocks_;
  absl::flat_hash_map<SequenceId, MirroredSequence> seqs_;
};

}  // namespace folio

#endif  // FOLIO_COMMON_PLAN_MIRROR_H_
