#include "scheduler/kv_cache_manager.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "scheduler/scheduler_config.h"

namespace folio {

KvCacheManager::KvCacheManager(const Options& options)
    : block_size_(options.block_size),
      block_shift_(std::countr_zero(static_cast<uint32_t>(options.block_size))),
      watermark_blocks_(WatermarkBlocks(options.watermark, options.num_device_blocks)),
      sliding_window_(options.sliding_window),
      host_tier_blocks_per_step_(options.host_tier_blocks_per_step),
      device_pool_(options.num_device_blocks, options.enable_prefix_caching),
      host_pool_(options.num_host_blocks, /*enable_caching=*/options.host_tier_enabled()) {
  FOLIO_CHECK_GT(block_size_, 0);
  FOLIO_CHECK_EQ(block_size_ & (block_size_ - 1), 0);  // a power of two
  FOLIO_CHECK_GE(sliding_window_, 0);
  FOLIO_CHECK_GE(host_tier_blocks_per_step_, 0);
}

void KvCacheManager::ExtendBlockHashes(Sequence& seq, int32_t num_tokens,
                                       std::string_view salt) const {
  std::vector<BlockHash>& hashes = seq.block_hashes();
  const int32_t num_full = num_tokens / block_size_;
  const std::vector<TokenId>& tokens = seq.tokens();
  while (static_cast<int32_t>(hashes.size()) < num_full) {
    const size_t i = hashes.size();
    const BlockHash* parent = i == 0 ? nullptr : &hashes[i - 1];
    hashes.push_back(HashBlockTokens(
        parent, std::span<const TokenId>(tokens.data() + i * block_size_, block_size_), salt));
  }
}

int32_t KvCacheManager::CountCachedBlocks(Sequence& seq, std::string_view salt) const {
  if (!device_pool_.caching_enabled()) return 0;
  // At least one token is always computed: its logits are what we sample from.
  const int32_t max_blocks = (seq.num_tokens() - 1) / block_size_;
  ExtendBlockHashes(seq, max_blocks * block_size_, salt);
  // A block counts when either tier holds it (a host copy only while the
  // step may still swap one in); the chain ends at the first miss.
  const bool host_tier = host_pool_.caching_enabled();
  int32_t host_hits_left = host_tier ? HostBlocksLeftFromHost() : 0;
  int32_t found = 0;
  while (found < max_blocks) {
    const BlockHash& hash = seq.block_hashes()[found];
    if (device_pool_.Lookup(hash) == kNoBlock) {
      if (host_hits_left == 0 || host_pool_.Lookup(hash) == kNoBlock) break;
      --host_hits_left;
    }
    ++found;
  }
  return found;
}

AllocStatus KvCacheManager::CanAdmit(std::span<Sequence* const> seqs, std::string_view salt,
                                     bool use_cached_prefix) {
  int32_t needed = 0;
  int32_t longest = 0;
  // Free cached blocks revived by hits; sequences of one group share them.
  absl::flat_hash_map<BlockId, bool> revived;
  for (Sequence* seq : seqs) {
    FOLIO_CHECK(seq->block_table().empty());
    const int32_t blocks = BlocksForTokens(seq->num_tokens() + 1);
    longest = std::max(longest, blocks);
    const int32_t cached = use_cached_prefix ? CountCachedBlocks(*seq, salt) : 0;
    needed += blocks - cached;
    // A hit on a free cached block takes it out of the free pool too, once;
    // a host-tier hit needs a device block to come back into.
    for (int32_t i = 0; i < cached; ++i) {
      const BlockId id = device_pool_.Lookup(seq->block_hashes()[i]);
      if (id == kNoBlock) {
        ++needed;
      } else if (device_pool_.ref_count(id) == 0 && revived.try_emplace(id, true).second) {
        ++needed;
      }
    }
  }
  // Even an empty pool must keep the watermark free: a request that needs
  // more would wait forever.
  if (longest > device_pool_.num_blocks() - watermark_blocks_) return AllocStatus::kNever;
  return device_pool_.num_free_blocks() - needed >= watermark_blocks_ ? AllocStatus::kOk
                                                                      : AllocStatus::kLater;
}

int32_t KvCacheManager::AttachCachedPrefix(Sequence& seq, std::string_view salt,
                                           std::vector<BlockCopy>* swap_in) {
  FOLIO_CHECK(seq.block_table().empty());
  const int32_t cached = CountCachedBlocks(seq, salt);
  // First take a reference on every hit, in both tiers: the device blocks
  // that host hits come back into could otherwise evict a later block of
  // this very prefix. Host copies stay held until this step's swap-in ran.
  // A host hit's table entry is filled once every hit is referenced.
  absl::InlinedVector<std::pair<int32_t, BlockId>, 4> host_hits;  // (index, host block)
  for (int32_t i = 0; i < cached; ++i) {
    const BlockHash& hash = seq.block_hashes()[i];
    const BlockId device = device_pool_.Lookup(hash);
    if (device != kNoBlock) {
      device_pool_.IncRef(device);
      seq.block_table().Append(device);
      continue;
    }
    const BlockId host = host_pool_.Lookup(hash);
    FOLIO_CHECK_NE(host, kNoBlock);
    FOLIO_CHECK(swap_in != nullptr);
    host_pool_.IncRef(host);
    HoldHostBlockForStep(host);
    host_hits.emplace_back(i, host);
    seq.block_table().Append(kNoBlock);
  }
  for (const auto& [i, host] : host_hits) {
    const BlockId device = AllocateDevice();
    FOLIO_CHECK_NE(device, kNoBlock);  // CanAdmit counted it
    swap_in->push_back({host, device});
    device_pool_.RegisterHash(device, seq.block_hashes()[i]);
    seq.block_table().Replace(i, device);
  }
  step_blocks_from_host_ += static_cast<int32_t>(host_hits.size());
  prefix_stats_.host_hits += static_cast<int64_t>(host_hits.size()) * block_size_;
  prefix_stats_.blocks_from_host += static_cast<int64_t>(host_hits.size());
  // A chain the step budget cut short: the host's blocks past the cut are
  // computed again (the device's, if any follow, cannot be used either).
  if (host_pool_.caching_enabled() && HostBlocksLeftFromHost() <= 0) {
    const int32_t max_blocks = (seq.num_tokens() - 1) / block_size_;
    for (int32_t i = cached; i < max_blocks; ++i) {
      const BlockHash& hash = seq.block_hashes()[i];
      if (device_pool_.Lookup(hash) == kNoBlock && host_pool_.Lookup(hash) == kNoBlock) break;
      ++prefix_stats_.blocks_over_budget;
    }
  }
  seq.set_num_computed_tokens(cached * block_size_);
  prefix_stats_.queries += seq.num_tokens();
  prefix_stats_.hits += cached * block_size_;
  return cached * block_size_;
}

BlockId KvCacheManager::AllocateDevice() {
  if (host_pool_.caching_enabled()) {
    const BlockId victim = device_pool_.next_free();
    const BlockHash* hash = victim == kNoBlock ? nullptr : device_pool_.cached_hash(victim);
    // Copy the content about to be evicted unless the host holds it already
    // or has no block left (swapped-out sequences hold them all).
    if (hash != nullptr && host_pool_.Lookup(*hash) == kNoBlock) {
      const bool within_budget = HostBlocksLeftToHost() > 0;
      if (!within_budget) ++prefix_stats_.blocks_over_budget;
      const BlockId copy = within_budget ? host_pool_.Allocate() : kNoBlock;
      if (copy != kNoBlock) {
        host_pool_.RegisterHash(copy, *hash);
        HoldHostBlockForStep(copy);
        step_demotions_.push_back({victim, copy});
        ++prefix_stats_.blocks_to_host;
      }
    }
  }
  return device_pool_.Allocate();
}

void KvCacheManager::FinishStep(std::vector<BlockCopy>* swap_out) {
  swap_out->insert(swap_out->end(), step_demotions_.begin(), step_demotions_.end());
  step_demotions_.clear();
  step_blocks_from_host_ = 0;
  for (BlockId id : step_host_holds_) host_pool_.DecRef(id);
  step_host_holds_.clear();
}

int32_t KvCacheManager::BlocksNeededBound(std::span<Sequence* const> seqs,
                                          std::span<const int32_t> num_new_tokens,
                                          int32_t reserve_tokens) const {
  int32_t bound = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const Sequence& seq = *seqs[s];
    const int32_t size = seq.block_table().size();
    const int32_t end = seq.num_computed_tokens() + num_new_tokens[s];
    bound += std::max(0, BlocksForTokens(std::max(end, reserve_tokens)) - size);
    if (num_new_tokens[s] > 0) {
      bound += std::max(0, std::min(BlocksForTokens(end), size) -
                               BlockIndex(seq.num_computed_tokens()));
    }
  }
  return bound;
}

int32_t KvCacheManager::BlocksNeeded(std::span<Sequence* const> seqs,
                                     std::span<const int32_t> num_new_tokens,
                                     int32_t reserve_tokens) const {
  FOLIO_CHECK_EQ(seqs.size(), num_new_tokens.size());
  // Sequences of one group share blocks: once one of them copies a shared
  // block, the others hold one reference fewer. Groups are small: a linear
  // list beats a hash map here, on the scheduler's hottest path.
  absl::InlinedVector<std::pair<BlockId, int32_t>, 4> released;
  int32_t needed = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const Sequence& seq = *seqs[s];
    const BlockTable& table = seq.block_table();
    const int32_t end = seq.num_computed_tokens() + num_new_tokens[s];
    const int32_t want = BlocksForTokens(std::max(end, reserve_tokens));
    needed += std::max(0, want - table.size());
    if (num_new_tokens[s] == 0) continue;
    const int32_t last_written = std::min(BlocksForTokens(end), table.size());
    for (int32_t i = BlockIndex(seq.num_computed_tokens()); i < last_written; ++i) {
      const BlockId id = table[i];
      auto it = std::find_if(released.begin(), released.end(),
                             [id](const auto& r) { return r.first == id; });
      const int32_t refs = device_pool_.ref_count(id) - (it == released.end() ? 0 : it->second);
      if (refs > 1) {
        ++needed;
        if (it == released.end()) {
          released.emplace_back(id, 1);
        } else {
          ++it->second;
        }
      }
    }
  }
  return needed;
}

bool KvCacheManager::AllocateSlots(Sequence& seq, int32_t num_new_tokens, int32_t reserve_tokens,
                                   std::string_view salt, std::vector<BlockCopy>* copies) {
  BlockTable& table = seq.block_table();
  FOLIO_CHECK(!table.on_host());
  const int32_t begin = seq.num_computed_tokens();
  const int32_t end = begin + num_new_tokens;
  FOLIO_CHECK_LE(end, seq.num_tokens());
  // Cheap bound first (every written block copied): the exact count reads
  // reference counts, and the scheduler has usually checked already.
  const int32_t appended = std::max(0, BlocksForTokens(std::max(end, reserve_tokens)) - table.size());
  const int32_t written = num_new_tokens > 0
      ? std::max(0, std::min(BlocksForTokens(end), table.size()) - BlockIndex(begin)) : 0;
  if (appended + written > device_pool_.num_free_blocks()) {
    Sequence* one[] = {&seq};
    const int32_t counts[] = {num_new_tokens};
    if (BlocksNeeded(one, counts, reserve_tokens) > device_pool_.num_free_blocks()) return false;
  }
  // Copy-on-write: a block about to be written must be ours alone.
  if (num_new_tokens > 0) {
    const int32_t last_written = std::min(BlocksForTokens(end), table.size());
    for (int32_t i = BlockIndex(begin); i < last_written; ++i) {
      const BlockId shared = table[i];
      if (device_pool_.ref_count(shared) == 1) continue;
      const BlockId own = AllocateDevice();
      FOLIO_CHECK_NE(own, kNoBlock);
      // Only slots before `begin` hold KV worth copying.
      if (i * block_size_ < begin) copies->push_back({shared, own});
      device_pool_.DecRef(shared);
      table.Replace(i, own);
    }
  }
  const int32_t want = BlocksForTokens(std::max(end, reserve_tokens));
  while (table.size() < want) {
    const BlockId id = AllocateDevice();
    FOLIO_CHECK_NE(id, kNoBlock);
    table.Append(id);
  }
  // Blocks this step fills become prefix-cache entries. Hashes are computed
  // only then (most steps fill none): they depend on the tokens alone, so
  // computing them lazily changes nothing.
  if (device_pool_.caching_enabled() && BlockIndex(begin) < BlockIndex(end)) {
    ExtendBlockHashes(seq, end, salt);
    for (int32_t i = BlockIndex(begin); i < BlockIndex(end); ++i) {
      device_pool_.RegisterHash(table[i], seq.block_hashes()[i]);
    }
  }
  return true;
}

void KvCacheManager::Fork(const Sequence& parent, Sequence& child) {
  FOLIO_CHECK(child.block_table().empty());
  const BlockTable& from = parent.block_table();
  FOLIO_CHECK(!from.on_host());
  for (int32_t i = 0; i < from.size(); ++i) {
    if (i >= from.num_released()) device_pool_.IncRef(from[i]);
    child.block_table().Append(from[i]);
  }
  child.block_table().ReleasePrefix(from.num_released());
}

int32_t KvCacheManager::ReleaseBeforeWindow(Sequence& seq) {
  BlockTable& table = seq.block_table();
  if (sliding_window_ == 0 || table.on_host()) return 0;
  // The next query sees from position num_computed - window + 1 on; the
  // blocks before that one's block are dead. The last block never is.
  const int32_t first_visible = seq.num_computed_tokens() - sliding_window_ + 1;
  const int32_t dead = std::min(std::max(first_visible, 0) >> block_shift_, table.size() - 1);
  const int32_t released = table.num_released();
  if (dead <= released) return 0;
  // Back to front, like Free: later blocks are the less likely to be shared.
  for (int32_t i = dead - 1; i >= released; --i) device_pool_.DecRef(table[i]);
  table.ReleasePrefix(dead);
  return dead - released;
}

void KvCacheManager::Free(Sequence& seq) {
  BlockTable& table = seq.block_table();
  BlockPool& pool = table.on_host() ? host_pool_ : device_pool_;
  // Tail first: the end of a sequence is the least likely to be shared, so
  // its cached blocks should be evicted before its prefix.
  for (int32_t i = table.size() - 1; i >= table.num_released(); --i) pool.DecRef(table[i]);
  table.Clear();
}

int32_t KvCacheManager::NumUniqueBlocks(std::span<Sequence* const> seqs) const {
  absl::flat_hash_map<BlockId, bool> seen;
  for (const Sequence* seq : seqs) {
    for (BlockId id : seq->block_table().live_blocks()) seen.try_emplace(id, true);
  }
  return static_cast<int32_t>(seen.size());
}

bool KvCacheManager::CanSwapOut(std::span<Sequence* const> seqs) const {
  return NumUniqueBlocks(seqs) <= host_pool_.num_free_blocks();
}

bool KvCacheManager::CanSwapIn(std::span<Sequence* const> seqs) const {
  const int32_t unique = NumUniqueBlocks(seqs);
  // The blocks came from the device pool, so an idle one always takes them
  // back; the headroom below could otherwise keep a group swapped forever.
  if (device_pool_.num_used_blocks() == 0) return unique <= device_pool_.num_free_blocks();
  // Room for the blocks plus one new block per sequence to grow into.
  const int32_t needed = unique + static_cast<int32_t>(seqs.size());
  return device_pool_.num_free_blocks() - needed >= watermark_blocks_;
}

void KvCacheManager::SwapOut(std::span<Sequence* const> seqs, std::vector<BlockCopy>* ops) {
  FOLIO_CHECK(CanSwapOut(seqs));
  MoveBetweenPools(seqs, device_pool_, host_pool_, /*to_host=*/true, ops);
}

void KvCacheManager::SwapIn(std::span<Sequence* const> seqs, std::vector<BlockCopy>* ops) {
  FOLIO_CHECK_LE(NumUniqueBlocks(seqs), device_pool_.num_free_blocks());
  MoveBetweenPools(seqs, host_pool_, device_pool_, /*to_host=*/false, ops);
}

void KvCacheManager::MoveBetweenPools(std::span<Sequence* const> seqs, BlockPool& from,
                                      BlockPool& to, bool to_host, std::vector<BlockCopy>* ops) {
  absl::flat_hash_map<BlockId, BlockId> moved;  // from-pool id -> to-pool id
  for (Sequence* seq : seqs) {
    BlockTable& table = seq->block_table();
    FOLIO_CHECK_EQ(table.on_host(), !to_host);
    std::vector<BlockId> new_ids;
    new_ids.reserve(table.size());
    // Released entries move nowhere: block 0 of the other pool stands in.
    new_ids.assign(table.num_released(), 0);
    for (BlockId id : table.live_blocks()) {
      auto [it, inserted] = moved.try_emplace(id, kNoBlock);
      if (inserted) {
        it->second = to_host ? to.Allocate() : AllocateDevice();
        FOLIO_CHECK_NE(it->second, kNoBlock);
        ops->push_back({id, it->second});
      } else {
        to.IncRef(it->second);
      }
      new_ids.push_back(it->second);
    }
    // Host blocks read by this step's swap-in stay held until it has run:
    // with the host tier, a copy of an evicted block could take them first.
    const bool hold = !to_host && host_pool_.caching_enabled();
    for (int32_t i = table.size() - 1; i >= table.num_released(); --i) {
      if (hold) {
        HoldHostBlockForStep(table[i]);
      } else {
        from.DecRef(table[i]);
      }
    }
    table.Reset(std::move(new_ids), to_host);
  }
}

absl::Status KvCacheManager::CheckInvariants(std::span<const Sequence* const> live) const {
  std::vector<int32_t> device_refs(device_pool_.num_blocks(), 0);
  std::vector<int32_t> host_refs(host_pool_.num_blocks(), 0);
  for (const Sequence* seq : live) {
    const BlockTable& table = seq->block_table();
    std::vector<int32_t>& refs = table.on_host() ? host_refs : device_refs;
    for (int32_t i = 0; i < table.size(); ++i) {
      const BlockId id = table[i];
      // Released placeholders, too, must be ids the workers accept.
      if (id < 0 || id >= static_cast<BlockId>(refs.size())) {
        return absl::InternalError(absl::StrCat("sequence ", seq->id(), " holds bad block ", id));
      }
      if (i >= table.num_released()) ++refs[id];
    }
    if (table.num_released() > 0 &&
        (sliding_window_ == 0 || table.num_released() >= table.size() ||
         table.num_released() * block_size_ > seq->num_computed_tokens() - sliding_window_ + 1)) {
      return absl::InternalError(absl::StrCat("sequence ", seq->id(), " released ",
                                              table.num_released(), " blocks of ", table.size(),
                                              " with ", seq->num_computed_tokens(),
                                              " tokens computed"));
    }
    if (table.size() < BlocksForTokens(seq->num_computed_tokens())) {
      return absl::InternalError(absl::StrCat("sequence ", seq->id(), " has ",
                                              seq->num_computed_tokens(),
                                              " computed tokens but ", table.size(), " blocks"));
    }
  }
  for (BlockId id : step_host_holds_) ++host_refs[id];  // this step's host-tier ops
  if (absl::Status s = device_pool_.CheckConsistency(device_refs); !s.ok()) {
    return absl::InternalError(absl::StrCat("device pool: ", s.message()));
  }
  if (absl::Status s = host_pool_.CheckConsistency(host_refs); !s.ok()) {
    return absl::InternalError(absl::StrCat("host pool: ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace folio
