#ifndef FOLIO_WORKER_FORWARD_BATCH_H_
#define FOLIO_WORKER_FORWARD_BATCH_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/plan_mirror.h"
#include "common/step_plan.h"
#include "common/types.h"

namespace folio {

// One step's flattened batch: every scheduled token, prefill chunks and
// decodes mixed, grouped by sequence. Host memory; the CPU runner reads it
// directly, the CUDA runner uploads it (gpu::CudaForwardBatch views the same
// vectors).
struct ForwardBatch {
  std::vector<TokenId> token_ids;      // [num_tokens]
  std::vector<int32_t> positions;      // [num_tokens]
  std::vector<int64_t> slot_mapping;   // [num_tokens]: block * block_size + offset
  std::vector<int32_t> query_start;    // [num_seqs + 1]: rows of each sequence
  std::vector<int32_t> context_lens;   // [num_seqs]: cached tokens after this step
  std::vector<int32_t> block_tables;   // [num_seqs][max_blocks_per_seq]
  int32_t max_blocks_per_seq = 0;
  std::vector<int32_t> logits_rows;    // token rows whose next-token logits are needed

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_seqs() const { return static_cast<int32_t>(context_lens.size()); }
  void Clear();
};

// Builds the batch of `plan` (whose metadata the caller has applied to
// `mirror` already: PlanMirror::ApplyMetadata). Every scheduled sequence is
// checked against and appended to `mirror` (PlanMirror::ApplyScheduled), in
// plan order; then, per sequence s of plan.scheduled:
//   - one row per scheduled token: its id, position and slot
//     (block_table[pos / block_size] * block_size + pos % block_size);
//   - query_start[s + 1] = rows so far; context_lens[s] = start + count;
//   - block_tables row s: the blocks covering [0, context_len), zero-padded
//     to max_blocks_per_seq (the most any sequence of the step needs, >= 1);
//   - the last row of s in logits_rows when its sample_mode is not kNone.
// `seqs` (when not null) gets the mirrored sequence of each scheduled one,
// in plan order; the pointers stay valid until the mirror next changes.
// Errors are the mirror's (the scheduler and this worker have diverged);
// `batch` is then partial and must not be run.
absl::Status BuildForwardBatch(const StepPlan& plan, PlanMirror& mirror, int32_t block_size,
                               ForwardBatch* batch, std::vector<const MirroredSequence*>* seqs);

}  // namespace folio

#endif  // FOLIO_WORKER_FORWARD_BATCH_H_
