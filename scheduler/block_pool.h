#ifndef FOLIO_SCHEDULER_BLOCK_POOL_H_
#define FOLIO_SCHEDULER_BLOCK_POOL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/types.h"
#include "scheduler/block_hash.h"
#include "scheduler/prefetch.h"

namespace folio {

// A fixed set of KV blocks addressed by index, with reference counts and,
// when caching is on, a hash -> block map of full blocks (prefix caching).
//
// Free blocks sit in one doubly linked queue in eviction order: blocks with no
// cached content at the head (handed out first), freed cached blocks at the
// tail, so cached content is evicted least-recently-freed first and only when
// no plain free block is left. Every operation is O(1).
//
// Thread-compatible: the owner (the scheduler's engine loop) serializes calls.
class BlockPool {
 public:
  BlockPool(int32_t num_blocks, bool enable_caching);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  // Free blocks, including cached ones that nobody holds (evictable).
  int32_t num_free_blocks() const { return num_free_; }
  int32_t num_used_blocks() const { return num_blocks() - num_free_; }
  // Free blocks that still hold reusable cached content.
  int32_t num_cached_free_blocks() const { return num_cached_free_; }
  bool caching_enabled() const { return caching_enabled_; }

  // Takes the block at the head of the free queue (evicting its cached
  // content, if any) with reference count 1. Returns kNoBlock when none is free.
  BlockId Allocate();
  // The block Allocate would hand out next (kNoBlock when none is free), and
  // the content it holds when it is cached (null otherwise): what a host tier
  // copies out before the content is evicted.
  BlockId next_free() const { return free_head_; }
  const BlockHash* cached_hash(BlockId id) const {
    return blocks_[id].cached ? &blocks_[id].hash : nullptr;
  }

  // REQUIRES: ref_count(id) > 0, or id is a free cached block (a prefix hit,
  // which takes it out of the free queue).
  void IncRef(BlockId id);
  // REQUIRES: ref_count(id) > 0. At zero the block goes back to the free
  // queue: cached blocks at the tail, others at the head.
  void DecRef(BlockId id);
  int32_t ref_count(BlockId id) const { return ref_counts_[id]; }
  // Fetches the cache line holding ref_count(id) (the scheduler's lookahead).
  void PrefetchRefCount(BlockId id) const { PrefetchLine(&ref_counts_[id]); }

  // Prefix cache. Lookup returns the block holding content `hash`, or kNoBlock.
  BlockId Lookup(const BlockHash& hash) const;
  // Records that full block `id` (held, ref > 0) holds content `hash`. If
  // another block already holds it, `id` stays uncached (a duplicate).
  void RegisterHash(BlockId id, const BlockHash& hash);
  bool is_cached(BlockId id) const { return blocks_[id].cached; }
  // Forgets every cached content (the workers lost their KV): free cached
  // blocks become plain free blocks, held ones are freed as plain blocks.
  void ClearCache();

  // Verifies the free queue, counters and hash map; `expected_refs[b]` is the
  // number of holders of block b that the caller can see.
  absl::Status CheckConsistency(const std::vector<int32_t>& expected_refs) const;

 private:
  // Metadata other than the reference count, which lives in its own dense
  // array: the scheduler reads counts of every running sequence each step.
  struct Block {
    bool cached = false;  // registered in hash_to_block_
    bool in_free_queue = false;
    BlockId prev = kNoBlock;  // free queue links
    BlockId next = kNoBlock;
    BlockHash hash;
  };

  void PushFreeFront(BlockId id);
  void PushFreeBack(BlockId id);
  void RemoveFromFreeQueue(BlockId id);
  void Evict(BlockId id);

  // Const after construction.
  const bool caching_enabled_;

  std::vector<Block> blocks_;
  std::vector<int32_t> ref_counts_;
  BlockId free_head_ = kNoBlock;
  BlockId free_tail_ = kNoBlock;
  int32_t num_free_ = 0;
  int32_t num_cached_free_ = 0;
  absl::flat_hash_map<BlockHash, BlockId> hash_to_block_;
};

}  // namespace folio

#endif  // FOLIO_SCHEDULER_BLOCK_POOL_H_
