#include "common/plan_mirror.h"

#include "absl/strings/str_cat.h"

namespace folio {

PlanMirror::PlanMirror(int32_t block_size, int32_t num_device_blocks)
    : block_size_(block_size), num_device_blocks_(num_device_blocks) {}

const MirroredSequence* PlanMirror::Find(SequenceId id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : &it->second;
}

absl::Status PlanMirror::ApplyMetadata(const StepPlan& plan) {
  for (SequenceId id : plan.finished_seq_ids) seqs_.erase(id);
  for (SequenceId id : plan.preempted_seq_ids) seqs_.erase(id);
  for (const NewSequenceData& n : plan.new_sequences) {
    MirroredSequence m;
    m.request_id = n.request_id;
    m.index = n.sequence_index;
    m.num_prompt_tokens = static_cast<int32_t>(n.prompt_token_ids.size());
    m.tokens = n.prompt_token_ids;
    m.tokens.insert(m.tokens.end(), n.output_token_ids.begin(), n.output_token_ids.end());
    m.blocks = n.block_ids;
    m.sampling = n.sampling;
    if (!seqs_.emplace(n.seq_id, std::move(m)).second) {
      return absl::InternalError(absl::StrCat("new sequence ", n.seq_id, " is already mirrored"));
    }
  }
  for (const CachedSequenceData& c : plan.cached_sequences) {
    auto it = seqs_.find(c.seq_id);
    if (it == seqs_.end()) {
      return absl::InternalError(absl::StrCat("diff for unknown sequence ", c.seq_id));
    }
    std::vector<BlockId>& blocks = it->second.blocks;
    if (c.block_table_offset < 0 || c.block_table_offset > static_cast<int32_t>(blocks.size())) {
      return absl::InternalError(absl::StrCat("sequence ", c.seq_id, ": bad table offset"));
    }
    blocks.resize(c.block_table_offset);
    blocks.insert(blocks.end(), c.block_ids.begin(), c.block_ids.end());
  }
  return absl::OkStatus();
}

absl::StatusOr<MirroredSequence*> PlanMirror::ApplyScheduled(const ScheduledSequence& work) {
  auto it = seqs_.find(work.seq_id);
  if (it == seqs_.end()) {
    return absl::InternalError(absl::StrCat("scheduled unknown sequence ", work.seq_id));
  }
  MirroredSequence& m = it->second;
  const int32_t start = work.start_position;
  if (start < 0 || start > static_cast<int32_t>(m.tokens.size())) {
    return absl::InternalError(absl::StrCat("sequence ", work.seq_id, ": start ", start,
                                            " beyond its ", m.tokens.size(), " tokens"));
  }
  // 64-bit: a plan's start_position near INT32_MAX must not overflow.
  const int64_t end = int64_t{start} + static_cast<int64_t>(work.token_ids.size());
  // The plan's tokens must agree with the mirror; tokens beyond it are new.
  for (int64_t p = start; p < end; ++p) {
    const TokenId t = work.token_ids[p - start];
    if (p < static_cast<int64_t>(m.tokens.size())) {
      if (m.tokens[p] != t) {
        return absl::InternalError(absl::StrCat("sequence ", work.seq_id, ": token at ", p,
                                                " is ", t, " but the mirror has ", m.tokens[p]));
      }
    } else {
      m.tokens.push_back(t);
    }
  }
  if (static_cast<int64_t>(m.blocks.size()) * block_size_ < end) {
    return absl::InternalError(absl::StrCat("sequence ", work.seq_id, ": ", m.blocks.size(),
                                            " blocks cannot hold ", end, " tokens"));
  }
  // A block id outside the pool is a wrong plan, not a memory error later.
  for (int64_t i = 0; i * block_size_ < end; ++i) {
    if (m.blocks[i] < 0 || m.blocks[i] >= num_device_blocks_) {
      return absl::InternalError(absl::StrCat("sequence ", work.seq_id, ": block ", m.blocks[i],
                                              " at table index ", i, " is outside the pool"));
    }
  }
  return &m;
}

}  // namespace folio
