#ifndef FOLIO_SCHEDULER_KV_CACHE_MANAGER_H_
#define FOLIO_SCHEDULER_KV_CACHE_MANAGER_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/step_plan.h"
#include "scheduler/block_pool.h"
#include "scheduler/sequence.h"

namespace folio {

// Answer to "can this request start (or resume) now?".
enum class AllocStatus {
  kOk,     // enough free blocks now
  kLater,  // not now; it fits once others finish
  kNever,  // cannot fit even in an empty pool
};

// Owns the global block tables' memory: a device pool and a host (swap) pool.
// The scheduler only asks it questions and applies its answers; every block
// operation the workers must perform comes back as BlockCopy ops.
//
// Thread-compatible: called only from the scheduler's engine loop.
class KvCacheManager {
 public:
  struct Options {
    int32_t block_size = 16;
    int32_t num_device_blocks = 0;
    int32_t num_host_blocks = 0;
    bool enable_prefix_caching = true;
    // Share of device blocks kept free at admission and swap-in, so a newly
    // admitted batch does not preempt at once.
    double watermark = 0.01;
    // Sliding-window attention on every layer: a query at position p sees
    // positions (p - sliding_window, p] only, so the blocks wholly before the
    // next query's window go back to the pool (ReleaseBeforeWindow). 0 = off.
    int32_t sliding_window = 0;
    // A host tier for the prefix cache (needs enable_prefix_caching and host
    // blocks): a cached device block about to be evicted is first copied
    // into a host block (a swap-out op), and a prefix that misses on the
    // device but hits on the host comes back by swap-in instead of being
    // computed. Host blocks of swapped-out sequences come first: cached host
    // copies are evicted (least recently used first) before a swap-out fails.
    bool host_prefix_cache = false;
    // The host tier's blocks moved per step, in each direction: evicted
    // blocks copied out beyond it are dropped, and a prefix hit beyond it is
    // computed again, so a burst of hits cannot stall the step's decodes.
    // Swaps of preempted sequences are not bounded by it. 0 = no bound.
    int32_t host_tier_blocks_per_step = 0;

    // Whether the host tier is really on: asked for, with a device cache to
    // feed it and host blocks to hold it.
    bool host_tier_enabled() const {
      return host_prefix_cache && enable_prefix_caching && num_host_blocks > 0;
    }
  };

  struct PrefixCacheStats {
    int64_t queries = 0;    // prompt tokens looked up
    int64_t hits = 0;       // of those, found in the cache (either tier)
    int64_t host_hits = 0;  // of the hits, found on the host (swapped in)
    int64_t blocks_to_host = 0;    // cached blocks copied to the host tier
    int64_t blocks_from_host = 0;  // host-tier blocks swapped back in
    // Cached blocks the step budget (host_tier_blocks_per_step) left out:
    // evicted blocks not copied to the host, host hits computed instead.
    int64_t blocks_over_budget = 0;
  };

  explicit KvCacheManager(const Options& options);
  KvCacheManager(const KvCacheManager&) = delete;
  KvCacheManager& operator=(const KvCacheManager&) = delete;

  int32_t block_size() const { return block_size_; }
  // Block sizes are powers of two: shifts, not divisions, on the hot path.
  int32_t BlocksForTokens(int32_t num_tokens) const {
    return (num_tokens + block_size_ - 1) >> block_shift_;
  }
  // The logical block holding token position `pos`.
  int32_t BlockIndex(int32_t pos) const { return pos >> block_shift_; }
  const BlockPool& device_pool() const { return device_pool_; }
  const BlockPool& host_pool() const { return host_pool_; }
  const PrefixCacheStats& prefix_cache_stats() const { return prefix_stats_; }
  int32_t watermark_blocks() const { return watermark_blocks_; }

  // Admission of sequences with empty tables (new or recompute-resumed):
  // room for all their current tokens plus one more each, counting prefix-
  // cache hits, above the watermark? kNever when even an empty pool could not
  // hold the longest of them above the watermark. (A group that fits one by
  // one but not together gets kLater even from an idle pool; the scheduler
  // turns that into never when nothing runs.)
  // Memoizes the sequences' block hashes. Without `use_cached_prefix` hits
  // are not counted (the caller will not attach them: prompt scoring).
  AllocStatus CanAdmit(std::span<Sequence* const> seqs, std::string_view salt,
                       bool use_cached_prefix = true);

  // Attaches the cached full blocks matching the start of `seq` (empty table)
  // and marks those tokens computed. Always leaves at least one token to
  // compute. Host-tier hits get a device block each and a swap-in op in
  // `swap_in` (required with the host tier). Returns the number of tokens
  // found in the cache.
  int32_t AttachCachedPrefix(Sequence& seq, std::string_view salt,
                             std::vector<BlockCopy>* swap_in = nullptr);

  // With the host tier: the copies of evicted cached device blocks into the
  // host tier since the last call, appended to `swap_out` (they must run
  // before this step's swap-ins, copies and KV writes, as the workers order
  // them), and the host blocks this step reads or writes become free to
  // reuse. Call once per step, after the step's last allocation.
  void FinishStep(std::vector<BlockCopy>* swap_out);
  bool host_prefix_cache() const { return host_pool_.caching_enabled(); }

  // Device blocks that AllocateSlots would take for these sequences, applied
  // in order (copy-on-write included). `reserve_tokens` makes each table
  // cover at least that many tokens (reservation policies; 0 = on demand).
  int32_t BlocksNeeded(std::span<Sequence* const> seqs, std::span<const int32_t> num_new_tokens,
                       int32_t reserve_tokens) const;
  // An upper bound on BlocksNeeded that reads no reference counts (every
  // written block counted as copied): when it fits, so does the exact count.
  int32_t BlocksNeededBound(std::span<Sequence* const> seqs,
                            std::span<const int32_t> num_new_tokens,
                            int32_t reserve_tokens) const;
  int32_t num_free_device_blocks() const { return device_pool_.num_free_blocks(); }
  // Fetches the reference count AllocateSlots reads before writing into the
  // last block of seq's (device) table. A hint: does nothing else.
  void PrefetchForAppend(const Sequence& seq) const {
    const BlockTable& table = seq.block_table();
    if (!table.empty() && !table.on_host()) device_pool_.PrefetchRefCount(table.back());
  }

  // Makes room for tokens [num_computed, num_computed + num_new_tokens) of
  // `seq`: appends blocks, and copies any shared block about to be written
  // (copy-on-write, recorded in `copies`). Registers newly full blocks in the
  // prefix cache. Returns false, changing nothing, when the pool is short.
  // REQUIRES: seq's table is on the device.
  bool AllocateSlots(Sequence& seq, int32_t num_new_tokens, int32_t reserve_tokens,
                     std::string_view salt, std::vector<BlockCopy>* copies);

  // `child` (empty table) shares every block of `parent` (and its released
  // prefix).
  void Fork(const Sequence& parent, Sequence& child);

  // With a sliding window: gives back the blocks of `seq` (on the device)
  // that lie wholly before the window of its next query, at position
  // num_computed_tokens(). Returns how many entries it released. REQUIRES: no
  // work of seq in flight (the workers finished reading them).
  int32_t ReleaseBeforeWindow(Sequence& seq);

  // Releases the sequence's blocks (device or host). Cached blocks stay
  // reusable until evicted. The table ends empty and on the device.
  void Free(Sequence& seq);

  // The workers lost every block's contents (a worker failure): the prefix
  // cache of both pools forgets them. Sequences must be freed first.
  void ForgetCachedContent() {
    device_pool_.ClearCache();
    host_pool_.ClearCache();
  }

  // Swap a group's blocks between pools, keeping blocks shared between its
  // sequences shared. Ops are (src, dst) pairs for the workers.
  int32_t NumUniqueBlocks(std::span<Sequence* const> seqs) const;
  bool CanSwapOut(std::span<Sequence* const> seqs) const;
  void SwapOut(std::span<Sequence* const> seqs, std::vector<BlockCopy>* ops);
  // Room for the blocks plus one block per sequence above the watermark, or
  // an idle device pool (which always takes back what was swapped out).
  bool CanSwapIn(std::span<Sequence* const> seqs) const;
  void SwapIn(std::span<Sequence* const> seqs, std::vector<BlockCopy>* ops);

  // Every block is free, cached-evictable or in use; each block's reference
  // count equals the number of tables (of `live`) that hold it; the free
  // queues and prefix-cache map agree with the counts.
  absl::Status CheckInvariants(std::span<const Sequence* const> live) const;

 private:
  // Hashes the full blocks of seq's first `num_tokens` tokens not hashed yet.
  void ExtendBlockHashes(Sequence& seq, int32_t num_tokens, std::string_view salt) const;
  // Leading blocks of seq found in the prefix cache, leaving >= 1 token to compute.
  int32_t CountCachedBlocks(Sequence& seq, std::string_view salt) const;
  void MoveBetweenPools(std::span<Sequence* const> seqs, BlockPool& from, BlockPool& to,
                        bool to_host, std::vector<BlockCopy>* ops);
  // A device block, copying the cached content it would evict to the host
  // tier first (when on, within the step's budget). kNoBlock when the device
  // pool is empty.
  BlockId AllocateDevice();
  // Host-tier blocks this step may still move in each direction.
  int32_t HostBlocksLeftToHost() const {
    return StepBudgetLeft(static_cast<int32_t>(step_demotions_.size()));
  }
  int32_t HostBlocksLeftFromHost() const { return StepBudgetLeft(step_blocks_from_host_); }
  int32_t StepBudgetLeft(int32_t used) const {
    return host_tier_blocks_per_step_ == 0 ? INT32_MAX : host_tier_blocks_per_step_ - used;
  }
  // Keeps host block `id` (referenced) until FinishStep: this step's ops
  // read or write it, so nothing else may take it before they run.
  void HoldHostBlockForStep(BlockId id) { step_host_holds_.push_back(id); }

  // Const after construction.
  const int32_t block_size_;
  const int32_t block_shift_;  // log2(block_size_)
  const int32_t watermark_blocks_;
  const int32_t sliding_window_;
  const int32_t host_tier_blocks_per_step_;

  BlockPool device_pool_;
  BlockPool host_pool_;
  PrefixCacheStats prefix_stats_;
  // Host tier, per step: pending device -> host copies of evicted cached
  // blocks, and host blocks referenced until the step's ops have run.
  std::vector<BlockCopy> step_demotions_;
  std::vector<BlockId> step_host_holds_;
  int32_t step_blocks_from_host_ = 0;  // prefix hits swapped in this step
};

}  // namespace folio

#endif  // FOLIO_SCHEDULER_KV_CACHE_MANAGER_H_
