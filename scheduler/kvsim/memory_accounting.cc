#include "scheduler/kvsim/memory_accounting.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace folio::kvsim {

absl::StatusOr<kernels::CacheDtype> ParseKvsimCacheDtype(std::string_view name) {
  using kernels::CacheDtype;
  if (name.empty() || name == "auto" || name == "float16" || name == "fp16") {
    return CacheDtype::kFloat16;
  }
  if (name == "float32" || name == "fp32") return CacheDtype::kFloat32;
  if (name == "bfloat16" || name == "bf16") return CacheDtype::kBFloat16;
  if (name == "int8") return CacheDtype::kInt8;
  if (name == "fp8" || name == "fp8_e4m3") return CacheDtype::kFp8E4m3;
  return absl::InvalidArgumentError(absl::StrCat(
      "--kv-cache-dtype '", std::string(name),
      "': expected auto (float16), float32, float16, bfloat16, int8 or fp8 (fp8_e4m3)"));
}

int64_t KvBlockBytes(const KvModelShape& shape, int32_t block_size, kernels::CacheDtype dtype) {
  const kernels::CacheShape block{shape.num_kv_heads, block_size, shape.head_dim};
  return int64_t{2} * shape.num_layers * kernels::BlockBytes(block, dtype);
}

int64_t TokenSlotsInBytes(int64_t bytes, const KvModelShape& shape, int32_t block_size,
                          kernels::CacheDtype dtype) {
  return bytes / std::max<int64_t>(KvBlockBytes(shape, block_size, dtype), 1) * block_size;
}

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
