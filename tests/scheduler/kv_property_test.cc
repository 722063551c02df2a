// Randomized property test of the KV layer: hundreds of thousands of random
// allocate / append / compute / fork / finish / swap-out / swap-in / preempt /
// abort operations straight against KvCacheManager, over both pools, with
//   - CheckInvariants after every single operation,
//   - a shadow KV cache (which token at which position sits in every slot of
//     both pools) updated only from the manager's answers: copy-on-write and
//     swap ops, and the token writes the allocated slots receive. Every
//     computed token of every live sequence must be where its block table
//     says, so a wrong prefix hit, a missed copy or a lost swap fails here;
//   - the answers' own contracts (BlocksNeeded is exactly what AllocateSlots
//     takes, a failed AllocateSlots changes nothing, CanAdmit kOk means the
//     prompt can be allocated, kNever means it never fits, swaps copy each
//     unique block once and keep sharing, an idle device takes back any
//     swapped group);
//   - after freeing everything: every block free or cached-free, all counts 0.
// With a sliding window, sequences about to compute first give back the blocks
// before their window (ReleaseBeforeWindow): every position a query can still
// see must keep its KV, and released entries hold no reference.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "scheduler/kv_cache_manager.h"

namespace folio {
namespace {

struct Config {
  uint64_t seed = 1;
  int32_t block_size = 16;
  int32_t device_blocks = 48;
  int32_t host_blocks = 32;
  bool caching = true;
  double watermark = 0.05;
  int32_t sliding_window = 0;
  bool host_tier = false;  // KvCacheManager::Options::host_prefix_cache
  int32_t host_tier_budget = 0;  // Options::host_tier_blocks_per_step (0: no bound)
  int64_t num_ops = 100000;
};

class KvModel {
 public:
  explicit KvModel(const Config& c)
      : c_(c),
        bs_(c.block_size),
        max_tokens_(12 * c.block_size),
        rng_(c.seed),
        dev_(static_cast<size_t>(c.device_blocks) * c.block_size, kEmpty),
        host_(static_cast<size_t>(c.host_blocks) * c.block_size, kEmpty) {
    KvCacheManager::Options o;
    o.block_size = c.block_size;
    o.num_device_blocks = c.device_blocks;
    o.num_host_blocks = c.host_blocks;
    o.enable_prefix_caching = c.caching;
    o.watermark = c.watermark;
    o.sliding_window = c.sliding_window;
    o.host_prefix_cache = c.host_tier;
    o.host_tier_blocks_per_step = c.host_tier_budget;
    kv_ = std::make_unique<KvCacheManager>(o);
    // Shared prompt stems, so that new requests hit each other's blocks.
    for (int i = 0; i < 6; ++i) {
      std::vector<TokenId> stem(static_cast<size_t>(4 * bs_ + Rand(2 * bs_)));
      for (TokenId& t : stem) t = static_cast<TokenId>(Rand(50000));
      stems_.push_back(std::move(stem));
    }
  }

  void Run() {
    for (op_ = 0; op_ < c_.num_ops; ++op_) {
      Step();
      if (::testing::Test::HasFatalFailure()) return;
      CheckAll(/*content=*/op_ % 512 == 0);
      if (::testing::Test::HasFatalFailure()) return;
    }
    for (const char* what : {"new", "admit", "compute", "append", "fork", "finish", "swap_out",
                             "swap_in", "preempt", "abort"}) {
      // Every kind of operation must have really happened, not just been tried.
      EXPECT_GT(done(what), c_.num_ops / 200) << what;
    }
    if (c_.sliding_window > 0) {
      EXPECT_GT(done("window_release"), c_.num_ops / 200);
    }
    if (c_.host_tier) {
      EXPECT_GT(done("to_host"), c_.num_ops / 200);
      EXPECT_GT(done("host_hit"), c_.num_ops / 1000);
    }
    std::string mix;
    for (const auto& [what, n] : done_) absl::StrAppend(&mix, " ", what, "=", n);
    ::testing::Test::RecordProperty("mix", mix);
    if (std::getenv("KV_PROPERTY_VERBOSE") != nullptr)
      std::printf("seed %llu:%s\n", static_cast<unsigned long long>(c_.seed), mix.c_str());
    DrainAndCheckEmpty();
  }

  int64_t done(const std::string& what) const {
    auto it = done_.find(what);
    return it == done_.end() ? 0 : it->second;
  }

 private:
  enum class Where { kWaiting, kDevice, kHost };
  struct Group {
    std::vector<std::unique_ptr<Sequence>> seqs;
    Where where = Where::kWaiting;
    std::string salt;
  };
  static constexpr int64_t kEmpty = -1;

  static int64_t Enc(TokenId t, int32_t pos) {
    return (static_cast<int64_t>(pos) << 32) | static_cast<uint32_t>(t);
  }
  uint64_t Rand(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  bool Chance(int percent) { return static_cast<int>(Rand(100)) < percent; }
  std::string At() const { return absl::StrCat(" (seed ", c_.seed, ", op ", op_, ")"); }

  std::vector<Sequence*> Seqs(Group& g) {
    std::vector<Sequence*> out;
    for (auto& s : g.seqs) out.push_back(s.get());
    return out;
  }
  std::vector<const Sequence*> AllLive() const {
    std::vector<const Sequence*> out;
    for (const auto& g : groups_) {
      for (const auto& s : g->seqs) out.push_back(s.get());
    }
    return out;
  }
  // A random group in one of the given states, or null.
  Group* Pick(std::initializer_list<Where> states) {
    std::vector<Group*> c;
    for (auto& g : groups_) {
      if (std::find(states.begin(), states.end(), g->where) != states.end()) c.push_back(g.get());
    }
    return c.empty() ? nullptr : c[Rand(c.size())];
  }
  void Remove(Group* g) {
    groups_.erase(
        std::find_if(groups_.begin(), groups_.end(), [g](const auto& p) { return p.get() == g; }));
  }
  TokenId RandomToken() { return static_cast<TokenId>(Rand(50000)); }

  void Step() {
    const uint64_t r = Rand(100);
    if (r < 12) return NewRequest();
    if (r < 26) return Admit();
    if (r < 60) return Compute();
    if (r < 65) return Append();
    if (r < 71) return Fork();
    if (r < 77) return FinishOne();
    if (r < 83) return SwapOut();
    if (r < 90) return SwapIn();
    if (r < 95) return Preempt();
    return Abort();
  }

  // ---------------------------------------------------------- operations

  void NewRequest() {
    if (groups_.size() >= 32) return;  // full: no fallback, the chains of fallbacks end here
    std::vector<TokenId> prompt;
    if (Chance(2)) {
      // Never fits: longer than the pool minus the watermark (some of them
      // would fit the bare pool).
      const int32_t usable = c_.device_blocks - kv_->watermark_blocks();
      prompt.resize(static_cast<size_t>(usable * bs_) +
                    Rand(static_cast<uint64_t>((c_.device_blocks + 1 - usable) * bs_) + 1));
      for (TokenId& t : prompt) t = RandomToken();
    } else if (Chance(70)) {
      const std::vector<TokenId>& stem = stems_[Rand(stems_.size())];
      prompt.assign(stem.begin(), stem.begin() + 1 + Rand(stem.size()));
      const uint64_t extra = Rand(2 * bs_);
      for (uint64_t i = 0; i < extra; ++i) prompt.push_back(RandomToken());
    } else {
      prompt.resize(1 + Rand(4 * bs_));
      for (TokenId& t : prompt) t = RandomToken();
    }
    auto g = std::make_unique<Group>();
    g->salt = Chance(20) ? "tenant-b" : "";
    g->seqs.push_back(std::make_unique<Sequence>(next_seq_++, next_req_, 0, prompt));
    ++next_req_;
    groups_.push_back(std::move(g));
    ++done_["new"];
  }

  void Admit() {
    Group* g = Pick({Where::kWaiting});
    if (g == nullptr) return NewRequest();
    std::vector<Sequence*> seqs = Seqs(*g);
    const AllocStatus status = kv_->CanAdmit(seqs, g->salt);
    int32_t longest = 0;
    for (Sequence* s : seqs) longest = std::max(longest, kv_->BlocksForTokens(s->num_tokens() + 1));
    const int32_t usable = kv_->device_pool().num_blocks() - kv_->watermark_blocks();
    if (status == AllocStatus::kNever) {
      ASSERT_GT(longest, usable) << "kNever for a group that fits" << At();
      ++done_["never"];
      return DropGroup(g);
    }
    ASSERT_LE(longest, usable) << "a sequence that can never fit is not kNever" << At();
    if (status == AllocStatus::kLater) {
      // An idle pool with nothing cached can only say later for a group
      // larger than the pool.
      // On an idle pool only a group can hear later (its sequences fit one
      // by one, not together); one sequence that fits must be ok.
      if (kv_->device_pool().num_used_blocks() == 0 && seqs.size() == 1) {
        ADD_FAILURE() << "kLater for one sequence on an idle pool" << At();
      }
      return;
    }
    const KvCacheManager::PrefixCacheStats before = kv_->prefix_cache_stats();
    int64_t tokens = 0, hits = 0;
    for (Sequence* s : seqs) {
      ASSERT_EQ(s->num_computed_tokens(), 0);
      std::vector<BlockCopy> swap_in;
      const int32_t hit = kv_->AttachCachedPrefix(*s, g->salt, &swap_in);
      // The step's order on the workers: copies to the host tier, then swap-ins.
      ASSERT_NO_FATAL_FAILURE(FinishStep());
      for (const BlockCopy& op : swap_in) {
        ASSERT_TRUE(c_.host_tier) << At();
        ApplyCopy(host_, dev_, op);
        ++done_["host_hit"];
      }
      ASSERT_EQ(hit % bs_, 0) << At();
      ASSERT_LT(hit, s->num_tokens()) << "no token left to compute" << At();
      ASSERT_EQ(s->num_computed_tokens(), hit);
      ASSERT_EQ(s->block_table().size(), hit / bs_);
      if (!c_.caching) {
        ASSERT_EQ(hit, 0);
      }
      tokens += s->num_tokens();
      hits += hit;
      ASSERT_NO_FATAL_FAILURE(VerifyContent(*s));
    }
    EXPECT_EQ(kv_->prefix_cache_stats().queries - before.queries, tokens);
    EXPECT_EQ(kv_->prefix_cache_stats().hits - before.hits, hits);
    if (hits > 0) ++done_["prefix_hit"];
    // kOk: the whole rest of the prompt can be allocated now.
    std::vector<int32_t> pending;
    for (Sequence* s : seqs) pending.push_back(s->num_pending_tokens());
    ASSERT_LE(kv_->BlocksNeeded(seqs, pending, 0), kv_->num_free_device_blocks())
        << "kOk but the prompt does not fit" << At();
    g->where = Where::kDevice;
    ++done_["admit"];
  }

  // One scheduling step for a running group: a chunk (or decode) per sequence.
  void Compute() {
    Group* g = Pick({Where::kDevice});
    if (g == nullptr) return Admit();
    std::vector<Sequence*> seqs = Seqs(*g);
    for (Sequence* s : seqs) ASSERT_NO_FATAL_FAILURE(ReleaseBeforeWindow(*s));
    std::vector<int32_t> counts;
    bool any = false;
    for (Sequence* s : seqs) {
      int32_t n = 0;
      if (s->num_pending_tokens() > 0 && !Chance(10)) {
        const int32_t chunk_cap =
            Chance(50) ? s->num_pending_tokens() : 1 + static_cast<int32_t>(Rand(2 * bs_));
        n = 1 + static_cast<int32_t>(Rand(std::min(chunk_cap, s->num_pending_tokens())));
      }
      any |= n > 0;
      counts.push_back(n);
    }
    const int32_t reserve =
        Chance(8) ? static_cast<int32_t>(Rand(seqs[0]->num_tokens() + 3 * bs_)) : 0;
    const int32_t needed = kv_->BlocksNeeded(seqs, counts, reserve);
    const int32_t free_before = kv_->num_free_device_blocks();
    if (needed > free_before) {
      // The first sequence alone: when BlocksNeeded says no, AllocateSlots
      // must say no and change nothing.
      Sequence& s = *seqs[0];
      Sequence* one[] = {&s};
      const int32_t one_count[] = {counts[0]};
      if (kv_->BlocksNeeded(one, one_count, reserve) <= free_before) return;
      const std::vector<BlockId> table = s.block_table().blocks();
      std::vector<int32_t> refs;
      for (BlockId b : table) refs.push_back(kv_->device_pool().ref_count(b));
      std::vector<BlockCopy> copies;
      ASSERT_FALSE(kv_->AllocateSlots(s, counts[0], reserve, g->salt, &copies)) << At();
      ASSERT_TRUE(copies.empty());
      ASSERT_EQ(s.block_table().blocks(), table);
      ASSERT_EQ(kv_->num_free_device_blocks(), free_before);
      for (size_t i = 0; i < table.size(); ++i) {
        ASSERT_EQ(kv_->device_pool().ref_count(table[i]), refs[i]);
      }
      ++done_["alloc_refused"];
      return;
    }
    for (size_t i = 0; i < seqs.size(); ++i) {
      Sequence& s = *seqs[i];
      std::vector<BlockCopy> copies;
      const std::vector<BlockId> old_table = s.block_table().blocks();
      ASSERT_TRUE(kv_->AllocateSlots(s, counts[i], reserve, g->salt, &copies))
          << "BlocksNeeded said the group fits" << At();
      ASSERT_NO_FATAL_FAILURE(FinishStep());  // before the copies and writes, as workers do
      const int32_t begin = s.num_computed_tokens();
      const int32_t end = begin + counts[i];
      ASSERT_GE(s.block_table().size(), kv_->BlocksForTokens(std::max(end, reserve)));
      // Blocks before the write never change; replaced ones are private now.
      for (int32_t b = 0; b < static_cast<int32_t>(old_table.size()); ++b) {
        if (s.block_table()[b] == old_table[b]) continue;
        ASSERT_GE(b, begin / bs_) << "a block outside the write range moved" << At();
        ASSERT_EQ(kv_->device_pool().ref_count(s.block_table()[b]), 1);
      }
      for (const BlockCopy& op : copies) {
        ASSERT_NE(op.src, op.dst);
        ASSERT_EQ(kv_->device_pool().ref_count(op.dst), 1);
        ASSERT_GT(kv_->device_pool().ref_count(op.src), 0) << "copy from a freed block" << At();
        ApplyCopy(dev_, dev_, op);
        ++done_["cow_copy"];
      }
      // The forward pass writes the new tokens' KV.
      for (int32_t p = begin; p < end; ++p) {
        dev_[Slot(s.block_table()[p / bs_], p)] = Enc(s.tokens()[p], p);
      }
      s.set_num_computed_tokens(end);
      // Sample the next token once everything is computed.
      if (s.num_pending_tokens() == 0 && s.num_tokens() < max_tokens_) {
        s.AppendToken(RandomToken(), -1.0f);
      }
    }
    ASSERT_EQ(free_before - kv_->num_free_device_blocks(), needed)
        << "BlocksNeeded differs from what AllocateSlots took" << At();
    for (Sequence* s : seqs) ASSERT_NO_FATAL_FAILURE(VerifyContent(*s));
    if (any) ++done_["compute"];
  }

  // Sliding window: the blocks no query to come can see go back, nothing
  // else changes.
  void ReleaseBeforeWindow(Sequence& s) {
    const BlockTable& t = s.block_table();
    const std::vector<BlockId> table = t.blocks();
    const int32_t before = t.num_released();
    std::vector<int32_t> refs;
    for (int32_t b = before; b < t.size(); ++b) refs.push_back(kv_->device_pool().ref_count(t[b]));
    const int32_t free_before = kv_->num_free_device_blocks();
    const int32_t n = kv_->ReleaseBeforeWindow(s);
    ASSERT_EQ(t.num_released(), before + n);
    ASSERT_EQ(t.blocks(), table) << "released entries keep their ids" << At();
    if (c_.sliding_window == 0) {
      ASSERT_EQ(n, 0);
      return;
    }
    // Exactly the blocks wholly before the next query's window, never the last.
    const int32_t first_visible = std::max(0, s.num_computed_tokens() - c_.sliding_window + 1);
    ASSERT_EQ(t.num_released(), std::max(before, std::min(first_visible / bs_, t.size() - 1)))
        << At();
    int32_t freed = 0;
    for (int32_t b = before; b < t.size(); ++b) {
      const int32_t want = refs[b - before] - (b < t.num_released() ? 1 : 0);
      ASSERT_EQ(kv_->device_pool().ref_count(t[b]), want) << "block index " << b << At();
      freed += b < t.num_released() && want == 0;
    }
    ASSERT_EQ(kv_->num_free_device_blocks() - free_before, freed) << At();
    if (n > 0) ++done_["window_release"];
  }

  // Several tokens at once (e.g. accepted speculative tokens) to compute later.
  void Append() {
    Group* g = Pick({Where::kDevice, Where::kHost, Where::kWaiting});
    if (g == nullptr) return NewRequest();
    Sequence& s = *g->seqs[Rand(g->seqs.size())];
    const uint64_t n = 1 + Rand(4);
    for (uint64_t i = 0; i < n && s.num_tokens() < max_tokens_; ++i) {
      s.AppendToken(RandomToken(), -0.5f);
    }
    ++done_["append"];
  }

  void Fork() {
    Group* g = Pick({Where::kDevice});
    if (g == nullptr || g->seqs.size() >= 4) return Compute();
    Sequence& parent = *g->seqs[Rand(g->seqs.size())];
    std::unique_ptr<Sequence> child =
        parent.Fork(next_seq_++, static_cast<int32_t>(g->seqs.size()));
    std::vector<int32_t> refs;
    for (BlockId b : parent.block_table().blocks()) refs.push_back(kv_->device_pool().ref_count(b));
    const int32_t free_before = kv_->num_free_device_blocks();
    kv_->Fork(parent, *child);
    ASSERT_EQ(child->block_table().blocks(), parent.block_table().blocks());
    const int32_t released = parent.block_table().num_released();
    ASSERT_EQ(child->block_table().num_released(), released);
    ASSERT_EQ(kv_->num_free_device_blocks(), free_before);
    for (int32_t i = released; i < static_cast<int32_t>(refs.size()); ++i) {
      ASSERT_EQ(kv_->device_pool().ref_count(parent.block_table()[i]), refs[i] + 1);
    }
    ASSERT_NO_FATAL_FAILURE(VerifyContent(*child));
    g->seqs.push_back(std::move(child));
    ++done_["fork"];
  }

  // One sequence of a group finishes (EOS, length, a losing beam).
  void FinishOne() {
    Group* g = Pick({Where::kDevice, Where::kHost});
    if (g == nullptr) return Compute();
    const size_t i = Rand(g->seqs.size());
    kv_->Free(*g->seqs[i]);
    g->seqs.erase(g->seqs.begin() + static_cast<std::ptrdiff_t>(i));
    if (g->seqs.empty()) Remove(g);
    ++done_["finish"];
  }

  void SwapOut() {
    Group* g = Pick({Where::kDevice});
    if (g == nullptr) return Compute();
    std::vector<Sequence*> seqs = Seqs(*g);
    const int32_t unique = kv_->NumUniqueBlocks(seqs);
    if (!kv_->CanSwapOut(seqs)) {
      ASSERT_GT(unique, kv_->host_pool().num_free_blocks()) << At();
      ++done_["swap_out_refused"];
      return;
    }
    ASSERT_NO_FATAL_FAILURE(Move(seqs, /*to_host=*/true, unique));
    g->where = Where::kHost;
    ++done_["swap_out"];
  }

  void SwapIn() {
    Group* g = Pick({Where::kHost});
    if (g == nullptr) return SwapOut();
    std::vector<Sequence*> seqs = Seqs(*g);
    const int32_t unique = kv_->NumUniqueBlocks(seqs);
    const bool idle = kv_->device_pool().num_used_blocks() == 0;
    if (!kv_->CanSwapIn(seqs)) {
      ASSERT_FALSE(idle) << "an idle device refuses a swapped group" << At();
      ASSERT_LT(kv_->num_free_device_blocks() - unique - static_cast<int32_t>(seqs.size()),
                kv_->watermark_blocks())
          << At();
      ++done_["swap_in_refused"];
      return;
    }
    ASSERT_LE(unique, kv_->num_free_device_blocks());
    ASSERT_NO_FATAL_FAILURE(Move(seqs, /*to_host=*/false, unique));
    g->where = Where::kDevice;
    ++done_["swap_in"];
  }

  // Swap and check: each unique block copied once, sharing kept, ops
  // pairing every old id with its new one.
  void Move(std::vector<Sequence*>& seqs, bool to_host, int32_t unique) {
    std::vector<std::vector<BlockId>> before;
    for (Sequence* s : seqs) before.push_back(s->block_table().blocks());
    const BlockPool& to = to_host ? kv_->host_pool() : kv_->device_pool();
    const int32_t to_free = to.num_free_blocks();
    std::vector<BlockCopy> ops;
    if (to_host) {
      kv_->SwapOut(seqs, &ops);
    } else {
      kv_->SwapIn(seqs, &ops);
    }
    ASSERT_NO_FATAL_FAILURE(FinishStep());
    ASSERT_EQ(static_cast<int32_t>(ops.size()), unique) << At();
    ASSERT_EQ(to_free - to.num_free_blocks(), unique) << At();
    absl::flat_hash_map<BlockId, BlockId> map;
    absl::flat_hash_map<BlockId, bool> dsts;
    for (const BlockCopy& op : ops) {
      ASSERT_TRUE(map.emplace(op.src, op.dst).second) << "block copied twice" << At();
      ASSERT_TRUE(dsts.emplace(op.dst, true).second) << "two blocks into one" << At();
      if (to_host) {
        ApplyCopy(dev_, host_, op);
      } else {
        ApplyCopy(host_, dev_, op);
      }
    }
    for (size_t i = 0; i < seqs.size(); ++i) {
      const BlockTable& t = seqs[i]->block_table();
      ASSERT_EQ(t.on_host(), to_host);
      ASSERT_EQ(t.synced_prefix(), 0);
      ASSERT_EQ(t.size(), static_cast<int32_t>(before[i].size()));
      for (int32_t b = t.num_released(); b < t.size(); ++b) {
        ASSERT_EQ(t[b], map.at(before[i][b])) << At();
      }
      ASSERT_NO_FATAL_FAILURE(VerifyContent(*seqs[i]));
    }
  }

  // Recompute preemption: blocks freed, the group waits to prefill again.
  void Preempt() {
    Group* g = Pick({Where::kDevice, Where::kHost});
    if (g == nullptr) return Admit();
    for (auto& s : g->seqs) {
      kv_->Free(*s);
      s->set_num_computed_tokens(0);
      ASSERT_TRUE(s->block_table().empty());
      ASSERT_FALSE(s->block_table().on_host());
    }
    g->where = Where::kWaiting;
    ++done_["preempt"];
  }

  void Abort() {
    Group* g = Pick({Where::kDevice, Where::kHost, Where::kWaiting});
    if (g == nullptr) return NewRequest();
    DropGroup(g);
    ++done_["abort"];
  }

  void DropGroup(Group* g) {
    for (auto& s : g->seqs) kv_->Free(*s);
    Remove(g);
  }

  // ------------------------------------------------------------- checks

  size_t Slot(BlockId b, int32_t pos) const {
    return static_cast<size_t>(b) * bs_ + static_cast<size_t>(pos % bs_);
  }
  // The end of a step: the host tier's copies of evicted cached blocks run
  // (first, on the workers: the device blocks they read out were just handed
  // to someone new) and its held host blocks are let go.
  void FinishStep() {
    std::vector<BlockCopy> to_host;
    kv_->FinishStep(&to_host);
    for (const BlockCopy& op : to_host) {
      ASSERT_TRUE(c_.host_tier) << At();
      ApplyCopy(dev_, host_, op);
      ++done_["to_host"];
    }
  }

  void ApplyCopy(const std::vector<int64_t>& from, std::vector<int64_t>& to, const BlockCopy& op) {
    // Through a temporary: from and to may be the same pool.
    std::vector<int64_t> tmp(from.begin() + static_cast<std::ptrdiff_t>(op.src) * bs_,
                             from.begin() + static_cast<std::ptrdiff_t>(op.src + 1) * bs_);
    std::copy(tmp.begin(), tmp.end(), to.begin() + static_cast<std::ptrdiff_t>(op.dst) * bs_);
  }

  // Every computed position the next query could see holds its token's KV.
  void VerifyContent(const Sequence& s) {
    const std::vector<int64_t>& pool = s.block_table().on_host() ? host_ : dev_;
    const int32_t released_end = s.block_table().num_released() * bs_;
    if (released_end > 0) {
      ASSERT_GT(c_.sliding_window, 0);
      ASSERT_LE(released_end, s.num_computed_tokens() - c_.sliding_window + 1)
          << "released a block the window still sees" << At();
    }
    for (int32_t p = released_end; p < s.num_computed_tokens(); ++p) {
      const BlockId b = s.block_table()[p / bs_];
      ASSERT_EQ(pool[Slot(b, p)], Enc(s.tokens()[p], p))
          << "sequence " << s.id() << " position " << p << " in "
          << (s.block_table().on_host() ? "host" : "device") << " block " << b
          << " holds the wrong KV" << At();
    }
  }

  void CheckAll(bool content) {
    const std::vector<const Sequence*> live = AllLive();
    const absl::Status st = kv_->CheckInvariants(live);
    ASSERT_TRUE(st.ok()) << st << At();
    const BlockPool& dev = kv_->device_pool();
    ASSERT_LE(dev.num_cached_free_blocks(), dev.num_free_blocks());
    ASSERT_EQ(dev.num_free_blocks() + dev.num_used_blocks(), dev.num_blocks());
    for (const auto& g : groups_) {
      for (const auto& s : g->seqs) {
        const bool on_host = s->block_table().on_host();
        switch (g->where) {
          case Where::kWaiting:
            ASSERT_TRUE(s->block_table().empty()) << At();
            break;
          case Where::kDevice:
            ASSERT_FALSE(on_host) << At();
            break;
          case Where::kHost:
            ASSERT_TRUE(on_host) << At();
            break;
        }
        if (content) {
          ASSERT_NO_FATAL_FAILURE(VerifyContent(*s));
        }
      }
    }
  }

  void DrainAndCheckEmpty() {
    while (!groups_.empty()) DropGroup(groups_.back().get());
    const std::vector<const Sequence*> none;
    const absl::Status st = kv_->CheckInvariants(none);
    ASSERT_TRUE(st.ok()) << st;
    for (const BlockPool* pool : {&kv_->device_pool(), &kv_->host_pool()}) {
      EXPECT_EQ(pool->num_free_blocks(), pool->num_blocks());
      EXPECT_EQ(pool->num_used_blocks(), 0);
      int32_t cached = 0;
      for (BlockId b = 0; b < pool->num_blocks(); ++b) {
        EXPECT_EQ(pool->ref_count(b), 0) << "block " << b;
        cached += pool->is_cached(b);
      }
      // Every block is free; the cached ones are exactly the cached-free ones.
      EXPECT_EQ(pool->num_cached_free_blocks(), cached);
    }
    // Only the host tier keeps cached content on the host.
    if (!c_.host_tier) {
      EXPECT_EQ(kv_->host_pool().num_cached_free_blocks(), 0);
    }
    if (!c_.caching) {
      EXPECT_EQ(kv_->device_pool().num_cached_free_blocks(), 0);
    }
  }

  const Config c_;
  const int32_t bs_;
  const int32_t max_tokens_;
  std::mt19937_64 rng_;
  std::unique_ptr<KvCacheManager> kv_;
  std::vector<int64_t> dev_;
  std::vector<int64_t> host_;
  std::vector<std::vector<TokenId>> stems_;
  std::vector<std::unique_ptr<Group>> groups_;
  SequenceId next_seq_ = 1;
  RequestId next_req_ = 1;
  int64_t op_ = 0;
  absl::flat_hash_map<std::string, int64_t> done_;
};

TEST(KvPropertyTest, TwoHundredThousandRandomOperations) {
  Config c;
  c.seed = 20240601;
  c.num_ops = 200000;
  KvModel model(c);
  model.Run();
  if (HasFailure()) return;
  // The mix reached the interesting paths, not just the easy ones.
  EXPECT_GT(model.done("prefix_hit"), 100);
  EXPECT_GT(model.done("cow_copy"), 100);
  EXPECT_GT(model.done("alloc_refused"), 100);
  EXPECT_GT(model.done("swap_in_refused"), 100);
  EXPECT_GT(model.done("swap_out_refused"), 10);
  EXPECT_GT(model.done("never"), 10);
}

struct SeedCase {
  uint64_t seed;
  int32_t block_size;
  bool caching;
  double watermark;
  int32_t device_blocks;
  int32_t host_blocks;
  int32_t sliding_window = 0;
  bool host_tier = false;
  int32_t host_tier_budget = 0;
};

void PrintTo(const SeedCase& p, std::ostream* os) {
  *os << "seed " << p.seed << ", block size " << p.block_size << ", caching " << p.caching
      << ", watermark " << p.watermark << ", " << p.device_blocks << "/" << p.host_blocks
      << " blocks, sliding window " << p.sliding_window << ", host tier " << p.host_tier
      << " (budget " << p.host_tier_budget << ")";
}

class KvPropertySeedTest : public ::testing::TestWithParam<SeedCase> {};

TEST_P(KvPropertySeedTest, RandomOperations) {
  const SeedCase& p = GetParam();
  Config c;
  c.seed = p.seed;
  c.block_size = p.block_size;
  c.caching = p.caching;
  c.watermark = p.watermark;
  c.device_blocks = p.device_blocks;
  c.host_blocks = p.host_blocks;
  c.sliding_window = p.sliding_window;
  c.host_tier = p.host_tier;
  c.host_tier_budget = p.host_tier_budget;
  c.num_ops = 50000;
  KvModel model(c);
  model.Run();
}

INSTANTIATE_TEST_SUITE_P(
    Seeds, KvPropertySeedTest,
    ::testing::Values(SeedCase{1, 8, true, 0.0, 40, 24}, SeedCase{2, 16, true, 0.1, 64, 16},
                      SeedCase{3, 32, true, 0.02, 48, 48}, SeedCase{4, 16, false, 0.05, 48, 32},
                      SeedCase{5, 8, true, 0.05, 24, 8}, SeedCase{6, 32, false, 0.0, 32, 64},
                      // Sliding windows: shorter than a block, a few blocks, unaligned.
                      SeedCase{7, 8, true, 0.0, 40, 24, 5}, SeedCase{8, 16, true, 0.05, 48, 32, 40},
                      SeedCase{9, 32, false, 0.02, 48, 48, 33}, SeedCase{10, 8, true, 0.1, 24, 8, 17},
                      // The prefix cache's host tier: roomy, tight (swaps evict the
                      // copies), with a window.
                      SeedCase{11, 16, true, 0.05, 24, 48, 0, true},
                      SeedCase{12, 8, true, 0.0, 24, 8, 0, true},
                      SeedCase{13, 32, true, 0.02, 32, 32, 40, true},
                      // ... and with a step budget of one or two blocks each way.
                      SeedCase{14, 16, true, 0.05, 24, 48, 0, true, 1},
                      SeedCase{15, 8, true, 0.0, 32, 32, 0, true, 2}),
    [](const auto& info) {
      const SeedCase& p = info.param;
      return absl::StrCat("seed", p.seed, "_bs", p.block_size, p.caching ? "_cache" : "_nocache",
                          p.sliding_window > 0 ? absl::StrCat("_window", p.sliding_window) : "",
                          p.host_tier ? "_hosttier" : "",
                          p.host_tier_budget > 0 ? absl::StrCat("_budget", p.host_tier_budget) : "");
    });

}  // namespace
}  // namespace folio
