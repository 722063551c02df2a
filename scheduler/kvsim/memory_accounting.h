#ifndef FOLIO_SCHEDULER_KVSIM_MEMORY_ACCOUNTING_H_
#define FOLIO_SCHEDULER_KVSIM_MEMORY_ACCOUNTING_H_

#include <cstdint>

#include "scheduler/reservation_space.h"
#include "scheduler/scheduler.h"

namespace folio::kvsim {

// Where the KV memory claimed by running requests goes, in token slots,
// summed over steps (the paper's Figure 2 categories):
//   token_states   slots holding a computed token's K/V
//   reserved       slots claimed for tokens the request will still produce
//   internal       slots claimed that will never hold a token (the unused
//                  tail of a paged block, or a reservation beyond the final
//                  length)
//   external       free slots that could not be used: the next waiting
//                  request fits in the free total but in no contiguous range
struct MemoryBreakdown {
  double token_states = 0;
  double reserved = 0;
  double internal = 0;
  double external = 0;
  int64_t steps = 0;

  double total() const { return token_states + reserved + internal + external; }
  double Share(double part) const { return total() > 0 ? part / total() : 0.0; }
};

// Adds one step's state. `space` is the contiguous slot space of a
// reservation policy, or null for paging. `head_claim` is the slot claim of
// the request at the head of the waiting queue (0 when none waits).
void AccountStep(const Scheduler& scheduler, const ContiguousSlotSpace* space,
                 int64_t head_claim, MemoryBreakdown& out);

// Blocks that sharing saves: the device blocks in use against the blocks the
// same sequences would hold each on their own, summed over steps.
struct SharingBreakdown {
  double shared_blocks = 0;
  double unshared_blocks = 0;
  double Saved() const { return unshared_blocks > 0 ? 1.0 - shared_blocks / unshared_blocks : 0.0; }
};
void AccountSharing(const Scheduler& scheduler, SharingBreakdown& out);

}  // namespace folio::kvsim

#endif  // FOLIO_SCHEDULER_KVSIM_MEMORY_ACCOUNTING_H_
