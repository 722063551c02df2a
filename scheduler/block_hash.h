#ifndef FOLIO_SCHEDULER_BLOCK_HASH_H_
#define FOLIO_SCHEDULER_BLOCK_HASH_H_

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "common/types.h"

namespace folio {

// Identity of a full KV block for prefix caching: SHA-256 over (parent block
// hash, this block's token ids, cache salt). Chaining makes a block's hash
// depend on the whole prefix; SHA-256 keeps it unpredictable (a weak hash let
// an attacker poison vLLM's prefix cache, CVE-2025-25183).
struct BlockHash {
  std::array<uint8_t, 32> bytes{};

  bool operator==(const BlockHash&) const = default;

  template <typename H>
  friend H AbslHashValue(H h, const BlockHash& b) {
    // The digest is already uniformly distributed; 8 bytes suffice for buckets.
    uint64_t prefix;
    std::memcpy(&prefix, b.bytes.data(), sizeof(prefix));
    return H::combine(std::move(h), prefix);
  }
};

// parent == nullptr for the first block of a sequence. The salt separates
// tenants that must not share cache entries; empty means no salt.
BlockHash HashBlockTokens(const BlockHash* parent, std::span<const TokenId> tokens,
                          std::string_view salt);

}  // namespace folio

#endif  // FOLIO_SCHEDULER_BLOCK_HASH_H_
