#ifndef FOLIO_SCHEDULER_KVSIM_MEMORY_ACCOUNTING_H_
#define FOLIO_SCHEDULER_KVSIM_MEMORY_ACCOUNTING_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "kernels/cache_layout.h"
#include "scheduler/reservation_space.h"
#include "scheduler/scheduler.h"

namespace folio::kvsim {

// The model whose KV the pool holds, for turning bytes into token slots:
// by default the paper's OPT-13B (40 layers, 40 heads of 128).
struct KvModelShape {
  int32_t num_layers = 40;
  int32_t num_kv_heads = 40;
  int32_t head_dim = 128;
};

// --kv-cache-dtype of folio-kvsim: "auto" (or empty) = float16, the paper's
// cache; "float32", "float16", "bfloat16"; "int8" or "fp8" / "fp8_e4m3"
// (one-byte codes with per-block, per-KV-head fp32 scales, as the CPU
// worker stores them). Anything else is INVALID_ARGUMENT naming the flag.
absl::StatusOr<kernels::CacheDtype> ParseKvsimCacheDtype(std::string_view name);
// Names: kernels::CacheDtypeName.

// Bytes of one KV block of `block_size` tokens, all layers, K and V, as
// the cache engines size it (kernels::BlockBytes: a quantized block's codes
// and scales, padded to 64 bytes per layer and K/V).
int64_t KvBlockBytes(const KvModelShape& shape, int32_t block_size, kernels::CacheDtype dtype);

// Token slots (whole blocks) that `bytes` of KV memory holds.
int64_t TokenSlotsInBytes(int64_t bytes, const KvModelShape& shape, int32_t block_size,
                          kernels::CacheDtype dtype);

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
