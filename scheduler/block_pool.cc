#include "scheduler/block_pool.h"

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace folio {

BlockPool::BlockPool(int32_t num_blocks, bool enable_caching)
    : caching_enabled_(enable_caching), blocks_(num_blocks), ref_counts_(num_blocks, 0) {
  FOLIO_CHECK_GE(num_blocks, 0);
  for (BlockId id = 0; id < num_blocks; ++id) PushFreeBack(id);
}

BlockId BlockPool::Allocate() {
  const BlockId id = free_head_;
  if (id == kNoBlock) return kNoBlock;
  RemoveFromFreeQueue(id);
  if (blocks_[id].cached) Evict(id);
  ref_counts_[id] = 1;
  // The next allocation will likely evict the new head's cached content:
  // start fetching its hash-map slot now (its metadata is in cache, the
  // unlink just wrote it). A hint only.
  if (free_head_ != kNoBlock && blocks_[free_head_].cached) {
    hash_to_block_.prefetch(blocks_[free_head_].hash);
  }
  return id;
}

void BlockPool::IncRef(BlockId id) {
  if (ref_counts_[id] == 0) {
    FOLIO_CHECK(blocks_[id].cached);  // only a cache hit revives a free block
    RemoveFromFreeQueue(id);
  }
  ++ref_counts_[id];
}

void BlockPool::DecRef(BlockId id) {
  FOLIO_CHECK_GT(ref_counts_[id], 0);
  if (--ref_counts_[id] > 0) return;
  if (blocks_[id].cached) {
    PushFreeBack(id);
  } else {
    PushFreeFront(id);
  }
}

BlockId BlockPool::Lookup(const BlockHash& hash) const {
  auto it = hash_to_block_.find(hash);
  return it == hash_to_block_.end() ? kNoBlock : it->second;
}

void BlockPool::RegisterHash(BlockId id, const BlockHash& hash) {
  if (!caching_enabled_) return;
  Block& b = blocks_[id];
  FOLIO_CHECK_GT(ref_counts_[id], 0);
  if (b.cached) {
    FOLIO_CHECK(b.hash == hash);  // content of a full block never changes
    return;
  }
  if (!hash_to_block_.try_emplace(hash, id).second) return;  // duplicate content
  b.cached = true;
  b.hash = hash;
}

void BlockPool::ClearCache() {
  for (Block& b : blocks_) b.cached = false;
  hash_to_block_.clear();
  num_cached_free_ = 0;
}

void BlockPool::Evict(BlockId id) {
  Block& b = blocks_[id];
  hash_to_block_.erase(b.hash);
  b.cached = false;
}

void BlockPool::PushFreeFront(BlockId id) {
  Block& b = blocks_[id];
  b.in_free_queue = true;
  b.prev = kNoBlock;
  b.next = free_head_;
  if (free_head_ != kNoBlock) blocks_[free_head_].prev = id;
  free_head_ = id;
  if (free_tail_ == kNoBlock) free_tail_ = id;
  ++num_free_;
  if (b.cached) ++num_cached_free_;
}

void BlockPool::PushFreeBack(BlockId id) {
  Block& b = blocks_[id];
  b.in_free_queue = true;
  b.next = kNoBlock;
  b.prev = free_tail_;
  if (free_tail_ != kNoBlock) blocks_[free_tail_].next = id;
  free_tail_ = id;
  if (free_head_ == kNoBlock) free_head_ = id;
  ++num_free_;
  if (b.cached) ++num_cached_free_;
}

void BlockPool::RemoveFromFreeQueue(BlockId id) {
  Block& b = blocks_[id];
  FOLIO_CHECK(b.in_free_queue);
  if (b.prev != kNoBlock) blocks_[b.prev].next = b.next; else free_head_ = b.next;
  if (b.next != kNoBlock) blocks_[b.next].prev = b.prev; else free_tail_ = b.prev;
  b.prev = b.next = kNoBlock;
  b.in_free_queue = false;
  --num_free_;
  if (b.cached) --num_cached_free_;
}

absl::Status BlockPool::CheckConsistency(const std::vector<int32_t>& expected_refs) const {
  if (expected_refs.size() != blocks_.size()) {
    return absl::InternalError("expected_refs has the wrong size");
  }
  int32_t free_seen = 0;
  int32_t cached_free_seen = 0;
  BlockId prev = kNoBlock;
  for (BlockId id = free_head_; id != kNoBlock; id = blocks_[id].next) {
    const Block& b = blocks_[id];
    if (!b.in_free_queue || ref_counts_[id] != 0 || b.prev != prev) {
      return absl::InternalError(absl::StrCat("free queue corrupt at block ", id));
    }
    if (++free_seen > num_blocks()) return absl::InternalError("free queue has a cycle");
    if (b.cached) ++cached_free_seen;
    prev = id;
  }
  if (prev != free_tail_) return absl::InternalError("free queue tail is wrong");
  if (free_seen != num_free_ || cached_free_seen != num_cached_free_) {
    return absl::InternalError(absl::StrCat("free counters ", num_free_, "/", num_cached_free_,
                                            " but queue holds ", free_seen, "/",
                                            cached_free_seen));
  }
  int32_t cached_seen = 0;
  for (BlockId id = 0; id < num_blocks(); ++id) {
    const Block& b = blocks_[id];
    if (ref_counts_[id] != expected_refs[id]) {
      return absl::InternalError(absl::StrCat("block ", id, " has ref count ", ref_counts_[id],
                                              " but ", expected_refs[id], " holders"));
    }
    if ((ref_counts_[id] == 0) != b.in_free_queue) {
      return absl::InternalError(absl::StrCat("block ", id, " is neither free nor in use"));
    }
    if (b.cached) {
      ++cached_seen;
      if (Lookup(b.hash) != id) {
        return absl::InternalError(absl::StrCat("cached block ", id, " missing from map"));
      }
    }
  }
  if (cached_seen != static_cast<int32_t>(hash_to_block_.size())) {
    return absl::InternalError("hash map holds blocks not marked cached");
  }
  return absl::OkStatus();
}

}  // namespace folio
