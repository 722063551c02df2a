#include "worker/forward_batch.h"

#include <algorithm>

namespace folio {

void ForwardBatch::Clear() {
  token_ids.clear();
  positions.clear();
  slot_mapping.clear();
  query_start.clear();
  context_lens.clear();
  block_tables.clear();
  max_blocks_per_seq = 0;
  logits_rows.clear();
}

absl::Status BuildForwardBatch(const StepPlan& plan, PlanMirror& mirror, int32_t block_size,
                               ForwardBatch* batch, std::vector<const MirroredSequence*>* seqs) {
  batch->Clear();
  std::vector<const MirroredSequence*> local;
  std::vector<const MirroredSequence*>& mirrored = seqs != nullptr ? *seqs : local;
  mirrored.clear();
  const int32_t bs = block_size;
  int32_t max_blocks = 0;
  for (const ScheduledSequence& work : plan.scheduled) {
    absl::StatusOr<MirroredSequence*> m = mirror.ApplyScheduled(work);
    if (!m.ok()) return m.status();
    mirrored.push_back(*m);
    const int32_t end = work.start_position + static_cast<int32_t>(work.token_ids.size());
    max_blocks = std::max(max_blocks, (end + bs - 1) / bs);
  }
  batch->max_blocks_per_seq = std::max(1, max_blocks);
  batch->query_start.push_back(0);
  for (size_t s = 0; s < plan.scheduled.size(); ++s) {
    const ScheduledSequence& work = plan.scheduled[s];
    const MirroredSequence& m = *mirrored[s];
    const int32_t count = static_cast<int32_t>(work.token_ids.size());
    for (int32_t i = 0; i < count; ++i) {
      const int32_t pos = work.start_position + i;
      batch->token_ids.push_back(work.token_ids[i]);
      batch->positions.push_back(pos);
      batch->slot_mapping.push_back(int64_t{m.blocks[pos / bs]} * bs + pos % bs);
    }
    batch->query_start.push_back(batch->num_tokens());
    batch->context_lens.push_back(work.start_position + count);
    const int32_t used = (work.start_position + count + bs - 1) / bs;
    for (int32_t b = 0; b < batch->max_blocks_per_seq; ++b) {
      batch->block_tables.push_back(b < used ? m.blocks[b] : 0);
    }
    if (work.sample_mode != SampleMode::kNone) {
      batch->logits_rows.push_back(batch->num_tokens() - 1);
    }
  }
  return absl::OkStatus();
}

}  // namespace folio
