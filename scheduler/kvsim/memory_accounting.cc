#include "scheduler/kvsim/memory_accounting.h"

#include <algorithm>

namespace folio::kvsim {

void AccountStep(const Scheduler& scheduler, const ContiguousSlotSpace* space,
                 int64_t head_claim, MemoryBreakdown& out) {
  ++out.steps;
  const int32_t block_size = scheduler.config().block_size;
  for (const Request* r : scheduler.RunningRequests()) {
    const int32_t final_len = r->num_prompt_tokens() + r->spec.expected_output_len;
    for (const auto& seq : r->seqs) {
      const int64_t tokens = seq->num_computed_tokens();
      out.token_states += tokens;
      if (space != nullptr && r->reserved_tokens > 0) {
        // A reservation: future tokens up to the final length are reserved,
        // the rest of the claim is never used.
        const int64_t claim = r->reserved_tokens;
        const int64_t used_eventually = std::min<int64_t>(claim, std::max(final_len, seq->num_tokens()));
        out.reserved += std::max<int64_t>(0, used_eventually - tokens);
        out.internal += std::max<int64_t>(0, claim - used_eventually);
      } else {
        // Paging: a sequence holds whole blocks; their unfilled tail is
        // internal fragmentation (at most block_size - 1 slots each).
        const int64_t slots = static_cast<int64_t>(seq->block_table().size()) * block_size;
        out.internal += std::max<int64_t>(0, slots - tokens);
      }
    }
  }
  if (space != nullptr && head_claim > 0 && head_claim <= space->free_slots() &&
      head_claim > space->largest_free_range()) {
    out.external += static_cast<double>(space->free_slots());
  }
}

void AccountSharing(const Scheduler& scheduler, SharingBreakdown& out) {
  const KvCacheManager& kv = scheduler.kv_cache();
  out.shared_blocks += kv.device_pool().num_used_blocks();
  for (const Request* r : scheduler.RunningRequests()) {
    for (const auto& seq : r->seqs) out.unshared_blocks += seq->block_table().size();
  }
}

}  // namespace folio::kvsim
