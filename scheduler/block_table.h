#ifndef FOLIO_SCHEDULER_BLOCK_TABLE_H_
#define FOLIO_SCHEDULER_BLOCK_TABLE_H_

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "common/check.h"
#include "common/types.h"

namespace folio {

// The blocks of one sequence, logical block i -> physical block id, in the
// device pool or (while swapped out) in the host pool. Holds no references
// itself: the KvCacheManager increments and decrements counts as it edits.
//
// Also tracks what the workers have not seen yet, so the next plan carries
// only the changed tail: table[synced_prefix():].
//
// With sliding-window attention the leading num_released() entries gave their
// blocks back: they lie wholly before the window of every query still to
// come, so no kernel reads them. Their ids are placeholders (stale or 0, always
// inside the pool) that hold no reference; positions keep their indices.
class BlockTable {
 public:
  BlockTable() = default;

  const std::vector<BlockId>& blocks() const { return blocks_; }
  int32_t size() const { return static_cast<int32_t>(blocks_.size()); }
  bool empty() const { return blocks_.empty(); }
  BlockId operator[](int32_t i) const { return blocks_[i]; }
  BlockId back() const { return blocks_.back(); }
  bool on_host() const { return on_host_; }

  void Append(BlockId id) { blocks_.push_back(id); }
  // Copy-on-write swaps in a private copy of a shared block; a host-tier
  // prefix hit fills the entry it held open.
  void Replace(int32_t index, BlockId id) {
    blocks_[index] = id;
    synced_prefix_ = std::min(synced_prefix_, index);
  }
  // Replaces every id (swap between pools; released entries stay released);
  // the workers must get it in full.
  void Reset(std::vector<BlockId> blocks, bool on_host) {
    blocks_ = std::move(blocks);
    on_host_ = on_host;
    synced_prefix_ = 0;
  }
  void Clear() {
    Reset({}, false);
    num_released_ = 0;
  }

  int32_t num_released() const { return num_released_; }
  // The entries that hold a block: all but the released prefix.
  std::span<const BlockId> live_blocks() const {
    return std::span<const BlockId>(blocks_).subspan(static_cast<size_t>(num_released_));
  }
  // Entries [0, n) gave their blocks back. The workers keep whatever id they
  // have there (never read), so this sends nothing. REQUIRES: n >= num_released().
  void ReleasePrefix(int32_t n) { num_released_ = n; }

  // Length of the prefix the workers already mirror.
  int32_t synced_prefix() const { return std::min(synced_prefix_, size()); }
  void MarkSynced() { synced_prefix_ = size(); }
  void MarkUnsynced() { synced_prefix_ = 0; }

 private:
  std::vector<BlockId> blocks_;
  int32_t synced_prefix_ = 0;
  int32_t num_released_ = 0;
  bool on_host_ = false;
};

}  // namespace folio

#endif  // FOLIO_SCHEDULER_BLOCK_TABLE_H_
