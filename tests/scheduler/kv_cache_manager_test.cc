// KvCacheManager: slot allocation, fork + copy-on-write, prefix caching,
// admission answers, BlocksNeeded, swapping between pools, invariants.
// Every test runs at block sizes 8, 16 and 32.

#include "scheduler/kv_cache_manager.h"

#include <algorithm>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace folio {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<TokenId> Tokens(int32_t n, TokenId base) {
  std::vector<TokenId> t(n);
  std::iota(t.begin(), t.end(), base);
  return t;
}

class KvCacheManagerTest : public ::testing::TestWithParam<int32_t> {
 protected:
  int32_t bs() const { return GetParam(); }

  void Init(int32_t device_blocks, int32_t host_blocks, bool caching = true,
            double watermark = 0.0) {
    KvCacheManager::Options o;
    o.block_size = bs();
    o.num_device_blocks = device_blocks;
    o.num_host_blocks = host_blocks;
    o.enable_prefix_caching = caching;
    o.watermark = watermark;
    kv_ = std::make_unique<KvCacheManager>(o);
  }

  Sequence& NewSeq(const std::vector<TokenId>& prompt) {
    seqs_.push_back(std::make_unique<Sequence>(next_id_++, 1, 0, prompt));
    return *seqs_.back();
  }
  Sequence& ForkOf(Sequence& parent) {
    seqs_.push_back(parent.Fork(next_id_++, 0));
    kv_->Fork(parent, *seqs_.back());
    return *seqs_.back();
  }

  // Allocates and "computes" the next n tokens; returns the copy ops.
  std::vector<BlockCopy> Compute(Sequence& s, int32_t n, int32_t reserve = 0,
                                 std::string_view salt = "") {
    std::vector<BlockCopy> copies;
    const int32_t free_before = kv_->num_free_device_blocks();
    Sequence* one[] = {&s};
    const int32_t counts[] = {n};
    const int32_t needed = kv_->BlocksNeeded(one, counts, reserve);
    EXPECT_TRUE(kv_->AllocateSlots(s, n, reserve, salt, &copies));
    EXPECT_EQ(free_before - kv_->num_free_device_blocks(), needed);
    s.set_num_computed_tokens(s.num_computed_tokens() + n);
    return copies;
  }
  // A new sequence whose whole prompt is computed (with a prefix lookup).
  Sequence& Prefilled(const std::vector<TokenId>& prompt, std::string_view salt = "") {
    Sequence& s = NewSeq(prompt);
    kv_->AttachCachedPrefix(s, salt);
    Compute(s, s.num_pending_tokens(), 0, salt);
    return s;
  }
  // Appends one sampled token and computes it.
  std::vector<BlockCopy> Decode(Sequence& s, TokenId token) {
    s.AppendToken(token, -1.0f);
    return Compute(s, s.num_pending_tokens());
  }

  // Frees a sequence that stays in Live() (finished or recompute-preempted):
  // nothing of it is in the cache any more.
  void Release(Sequence& s) {
    kv_->Free(s);
    s.set_num_computed_tokens(0);
  }

  std::vector<const Sequence*> Live() const {
    std::vector<const Sequence*> out;
    for (const auto& s : seqs_) out.push_back(s.get());
    return out;
  }
  void ExpectInvariants() {
    const absl::Status s = kv_->CheckInvariants(Live());
    EXPECT_TRUE(s.ok()) << s;
  }
  void ExpectAllFree() {
    EXPECT_EQ(kv_->device_pool().num_free_blocks(), kv_->device_pool().num_blocks());
    EXPECT_EQ(kv_->host_pool().num_free_blocks(), kv_->host_pool().num_blocks());
    for (BlockId b = 0; b < kv_->device_pool().num_blocks(); ++b) {
      EXPECT_EQ(kv_->device_pool().ref_count(b), 0);
    }
    for (BlockId b = 0; b < kv_->host_pool().num_blocks(); ++b) {
      EXPECT_EQ(kv_->host_pool().ref_count(b), 0);
    }
    ExpectInvariants();
  }

  std::unique_ptr<KvCacheManager> kv_;
  std::vector<std::unique_ptr<Sequence>> seqs_;
  SequenceId next_id_ = 1;
};

INSTANTIATE_TEST_SUITE_P(BlockSizes, KvCacheManagerTest, ::testing::Values(8, 16, 32),
                         [](const auto& info) { return "bs" + std::to_string(info.param); });

// ---------------------------------------------------------------- allocation

TEST_P(KvCacheManagerTest, PrefillAllocatesCeilTokensOverBlockSize) {
  Init(16, 0);
  Sequence& s = NewSeq(Tokens(2 * bs() + bs() / 2, 100));
  std::vector<BlockCopy> copies = Compute(s, s.num_tokens());
  EXPECT_THAT(copies, IsEmpty());
  EXPECT_EQ(s.block_table().size(), 3);
  EXPECT_EQ(kv_->num_free_device_blocks(), 13);
  std::set<BlockId> distinct(s.block_table().blocks().begin(), s.block_table().blocks().end());
  EXPECT_EQ(distinct.size(), 3u);
  for (BlockId b : s.block_table().blocks()) EXPECT_EQ(kv_->device_pool().ref_count(b), 1);
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, DecodeAppendsABlockExactlyWhenTheLastOneIsFull) {
  Init(16, 0);
  Sequence& s = NewSeq(Tokens(bs() - 2, 0));
  Compute(s, s.num_tokens());
  ASSERT_EQ(s.block_table().size(), 1);
  for (int32_t i = 0; i < 2 * bs() + 3; ++i) {
    const std::vector<BlockId> before = s.block_table().blocks();
    EXPECT_THAT(Decode(s, 1000 + i), IsEmpty());
    EXPECT_EQ(s.block_table().size(), kv_->BlocksForTokens(s.num_computed_tokens()))
        << "after " << s.num_computed_tokens() << " tokens";
    // Existing blocks never move.
    for (size_t j = 0; j < before.size(); ++j) EXPECT_EQ(s.block_table()[j], before[j]);
    ExpectInvariants();
  }
}

TEST_P(KvCacheManagerTest, ChunkedPrefillGrowsTheTableChunkByChunk) {
  Init(16, 0);
  Sequence& s = NewSeq(Tokens(3 * bs() + 1, 0));
  for (int32_t chunk : {bs() / 2, bs(), 1, bs() + bs() / 2}) {
    Compute(s, chunk);
    EXPECT_EQ(s.block_table().size(), kv_->BlocksForTokens(s.num_computed_tokens()));
    ExpectInvariants();
  }
  EXPECT_EQ(s.num_pending_tokens(), 0);
  EXPECT_EQ(s.block_table().size(), 4);
}

TEST_P(KvCacheManagerTest, ReserveTokensPreallocatesBlocks) {
  Init(16, 0);
  Sequence& s = NewSeq(Tokens(bs() + 1, 0));
  Compute(s, s.num_tokens(), /*reserve=*/5 * bs());
  EXPECT_EQ(s.block_table().size(), 5);
  const std::vector<BlockId> blocks = s.block_table().blocks();
  for (int i = 0; i < 3 * bs(); ++i) {
    s.AppendToken(i, 0.0f);
    std::vector<BlockCopy> copies = Compute(s, 1, 5 * bs());
    EXPECT_THAT(copies, IsEmpty());
  }
  EXPECT_EQ(s.block_table().blocks(), blocks);
  EXPECT_EQ(kv_->num_free_device_blocks(), 11);
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, AllocateSlotsFailsWithoutChangingAnything) {
  Init(3, 0);
  Sequence& big = NewSeq(Tokens(3 * bs() + 1, 0));
  std::vector<BlockCopy> copies;
  EXPECT_FALSE(kv_->AllocateSlots(big, big.num_tokens(), 0, "", &copies));
  EXPECT_TRUE(big.block_table().empty());
  EXPECT_THAT(copies, IsEmpty());
  EXPECT_EQ(kv_->num_free_device_blocks(), 3);
  // A reservation beyond the pool fails too.
  Sequence& small = NewSeq(Tokens(2, 0));
  EXPECT_FALSE(kv_->AllocateSlots(small, 2, /*reserve=*/4 * bs(), "", &copies));
  EXPECT_TRUE(small.block_table().empty());
  EXPECT_EQ(kv_->num_free_device_blocks(), 3);
  ExpectInvariants();
  // Exactly the pool works.
  Sequence& fits = NewSeq(Tokens(3 * bs(), 0));
  Compute(fits, fits.num_tokens());
  EXPECT_EQ(kv_->num_free_device_blocks(), 0);
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, FailedCopyOnWriteChangesNothing) {
  Init(2, 0);
  Sequence& parent = Prefilled(Tokens(bs() + bs() / 2, 0));
  Sequence& child = ForkOf(parent);
  ASSERT_EQ(kv_->num_free_device_blocks(), 0);
  parent.AppendToken(7, 0.0f);
  const std::vector<BlockId> before = parent.block_table().blocks();
  std::vector<BlockCopy> copies;
  EXPECT_FALSE(kv_->AllocateSlots(parent, 1, 0, "", &copies));
  EXPECT_EQ(parent.block_table().blocks(), before);
  EXPECT_EQ(child.block_table().blocks(), before);
  EXPECT_THAT(copies, IsEmpty());
  for (BlockId b : before) EXPECT_EQ(kv_->device_pool().ref_count(b), 2);
  ExpectInvariants();
}

// ------------------------------------------------------- fork, copy-on-write

TEST_P(KvCacheManagerTest, ForkSharesEveryBlock) {
  Init(16, 0);
  Sequence& parent = Prefilled(Tokens(2 * bs() + 3, 0));
  Sequence& c1 = ForkOf(parent);
  Sequence& c2 = ForkOf(parent);
  EXPECT_EQ(c1.block_table().blocks(), parent.block_table().blocks());
  EXPECT_EQ(c2.block_table().blocks(), parent.block_table().blocks());
  for (BlockId b : parent.block_table().blocks()) EXPECT_EQ(kv_->device_pool().ref_count(b), 3);
  EXPECT_EQ(kv_->num_free_device_blocks(), 13);
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, AppendIntoSharedPartialBlockCopiesOnceThenWritesInPlace) {
  Init(16, 0);
  Sequence& parent = Prefilled(Tokens(bs() + bs() / 2, 0));
  Sequence& child = ForkOf(parent);
  const BlockId full = parent.block_table()[0];
  const BlockId partial = parent.block_table()[1];

  std::vector<BlockCopy> copies = Decode(parent, 500);
  ASSERT_EQ(copies.size(), 1u);
  const BlockId own = parent.block_table()[1];
  EXPECT_NE(own, partial);
  EXPECT_EQ(copies[0], (BlockCopy{partial, own}));
  EXPECT_EQ(parent.block_table()[0], full);  // the full block stays shared
  EXPECT_EQ(kv_->device_pool().ref_count(full), 2);
  EXPECT_EQ(kv_->device_pool().ref_count(partial), 1);
  EXPECT_EQ(kv_->device_pool().ref_count(own), 1);
  EXPECT_EQ(child.block_table().blocks(), (std::vector<BlockId>{full, partial}));
  ExpectInvariants();

  // The other holder is now alone in the block: it writes in place.
  copies = Decode(child, 600);
  EXPECT_THAT(copies, IsEmpty());
  EXPECT_EQ(child.block_table().blocks(), (std::vector<BlockId>{full, partial}));
  // And so does the parent, in its own copy.
  copies = Decode(parent, 501);
  EXPECT_THAT(copies, IsEmpty());
  EXPECT_EQ(parent.block_table().blocks(), (std::vector<BlockId>{full, own}));
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, CopyOnWriteMarksTheReplacedBlockForResend) {
  Init(16, 0);
  Sequence& parent = Prefilled(Tokens(2 * bs() + 1, 0));
  ForkOf(parent);
  parent.block_table().MarkSynced();
  Decode(parent, 9);
  EXPECT_EQ(parent.block_table().synced_prefix(), 2);  // the diff restarts at the copy
}

TEST_P(KvCacheManagerTest, ForkAtABlockBoundaryNeedsNoCopy) {
  Init(16, 0);
  Sequence& parent = Prefilled(Tokens(2 * bs(), 0));
  Sequence& child = ForkOf(parent);
  EXPECT_THAT(Decode(parent, 1), IsEmpty());
  EXPECT_THAT(Decode(child, 2), IsEmpty());
  EXPECT_EQ(parent.block_table().size(), 3);
  EXPECT_EQ(child.block_table().size(), 3);
  EXPECT_NE(parent.block_table()[2], child.block_table()[2]);
  EXPECT_EQ(kv_->device_pool().ref_count(parent.block_table()[0]), 2);
  EXPECT_EQ(kv_->device_pool().ref_count(parent.block_table()[1]), 2);
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, WritingIntoSharedEmptyReservedBlockReplacesItWithoutCopy) {
  Init(16, 0);
  Sequence& parent = NewSeq(Tokens(bs(), 0));
  Compute(parent, bs(), /*reserve=*/2 * bs());
  ASSERT_EQ(parent.block_table().size(), 2);  // block 1 reserved, empty
  Sequence& child = ForkOf(parent);
  const BlockId reserved = parent.block_table()[1];

  std::vector<BlockCopy> copies;
  parent.AppendToken(5, 0.0f);
  Sequence* one[] = {&parent};
  const int32_t counts[] = {1};
  EXPECT_EQ(kv_->BlocksNeeded(one, counts, 2 * bs()), 1);
  ASSERT_TRUE(kv_->AllocateSlots(parent, 1, 2 * bs(), "", &copies));
  parent.set_num_computed_tokens(bs() + 1);
  EXPECT_THAT(copies, IsEmpty());  // nothing in it worth copying
  EXPECT_NE(parent.block_table()[1], reserved);
  EXPECT_EQ(kv_->device_pool().ref_count(reserved), 1);
  EXPECT_EQ(child.block_table()[1], reserved);

  child.AppendToken(6, 0.0f);
  copies = Compute(child, 1, 2 * bs());
  EXPECT_THAT(copies, IsEmpty());
  EXPECT_EQ(child.block_table()[1], reserved);
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, ChainOfForksCopiesOncePerWriterButTheLast) {
  Init(32, 0);
  Sequence& parent = Prefilled(Tokens(bs() / 2, 0));
  Sequence& a = ForkOf(parent);
  Sequence& b = ForkOf(a);
  const BlockId shared = parent.block_table()[0];
  EXPECT_EQ(kv_->device_pool().ref_count(shared), 3);
  std::vector<BlockCopy> all;
  for (Sequence* s : {&b, &parent, &a}) {
    std::vector<BlockCopy> c = Decode(*s, 77);
    all.insert(all.end(), c.begin(), c.end());
  }
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].src, shared);
  EXPECT_EQ(all[1].src, shared);
  EXPECT_NE(all[0].dst, all[1].dst);
  EXPECT_EQ(a.block_table()[0], shared);  // the last writer kept it
  EXPECT_EQ(kv_->device_pool().ref_count(shared), 1);
  ExpectInvariants();
}

// ------------------------------------------------------------ prefix caching

TEST_P(KvCacheManagerTest, SecondSequenceWithSamePromptAttachesTheCachedWholeBlocks) {
  Init(32, 0);
  const std::vector<TokenId> prompt = Tokens(3 * bs() + 3, 10);
  Sequence& a = Prefilled(prompt);
  EXPECT_EQ(kv_->prefix_cache_stats().queries, static_cast<int64_t>(prompt.size()));
  EXPECT_EQ(kv_->prefix_cache_stats().hits, 0);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(kv_->device_pool().is_cached(a.block_table()[i]));
  EXPECT_FALSE(kv_->device_pool().is_cached(a.block_table()[3]));  // partial: never cached

  Sequence& b = NewSeq(prompt);
  Sequence* group[] = {&b};
  EXPECT_EQ(kv_->CanAdmit(group, ""), AllocStatus::kOk);
  EXPECT_EQ(kv_->AttachCachedPrefix(b, ""), 3 * bs());
  EXPECT_EQ(b.num_computed_tokens(), 3 * bs());
  EXPECT_THAT(b.block_table().blocks(),
              ElementsAre(a.block_table()[0], a.block_table()[1], a.block_table()[2]));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(kv_->device_pool().ref_count(a.block_table()[i]), 2);
  EXPECT_EQ(kv_->prefix_cache_stats().queries, 2 * static_cast<int64_t>(prompt.size()));
  EXPECT_EQ(kv_->prefix_cache_stats().hits, 3 * bs());  // in tokens
  ExpectInvariants();

  // The rest is computed into b's own block: no copy of a shared block.
  std::vector<BlockCopy> copies = Compute(b, b.num_pending_tokens());
  EXPECT_THAT(copies, IsEmpty());
  EXPECT_EQ(b.block_table().size(), 4);
  EXPECT_NE(b.block_table()[3], a.block_table()[3]);
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, AtLeastOneTokenIsAlwaysComputed) {
  Init(64, 0);
  // Exact multiples of the block size: the last block is computed again.
  for (int32_t blocks : {1, 2, 4}) {
    const std::vector<TokenId> prompt = Tokens(blocks * bs(), 1000 * blocks);
    Prefilled(prompt);
    Sequence& b = NewSeq(prompt);
    EXPECT_EQ(kv_->AttachCachedPrefix(b, ""), (blocks - 1) * bs()) << blocks << " blocks";
    EXPECT_EQ(b.num_pending_tokens(), bs());
    Compute(b, b.num_pending_tokens());
    ExpectInvariants();
  }
  // One token past a block boundary: everything but that token is a hit.
  const std::vector<TokenId> prompt = Tokens(2 * bs() + 1, 7);
  Prefilled(prompt);
  Sequence& c = NewSeq(prompt);
  EXPECT_EQ(kv_->AttachCachedPrefix(c, ""), 2 * bs());
  EXPECT_EQ(c.num_pending_tokens(), 1);
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, HitsStopWhereThePromptsDiverge) {
  Init(32, 0);
  std::vector<TokenId> prompt = Tokens(4 * bs(), 0);
  Prefilled(prompt);
  prompt[2 * bs() + 1] = 99999;  // block 2 differs; blocks 3.. have other parents
  Sequence& b = NewSeq(prompt);
  EXPECT_EQ(kv_->AttachCachedPrefix(b, ""), 2 * bs());
  // A first block that differs: no hit at all, even if later blocks match.
  std::vector<TokenId> other = Tokens(4 * bs(), 0);
  other[0] = -5;
  Sequence& c = NewSeq(other);
  EXPECT_EQ(kv_->AttachCachedPrefix(c, ""), 0);
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, SaltSeparatesCacheEntries) {
  Init(32, 0);
  const std::vector<TokenId> prompt = Tokens(2 * bs() + 1, 3);
  Prefilled(prompt, "tenant-a");
  Sequence& other_tenant = NewSeq(prompt);
  EXPECT_EQ(kv_->AttachCachedPrefix(other_tenant, "tenant-b"), 0);
  Sequence& no_salt = NewSeq(prompt);
  EXPECT_EQ(kv_->AttachCachedPrefix(no_salt, ""), 0);
  Sequence& same_tenant = NewSeq(prompt);
  EXPECT_EQ(kv_->AttachCachedPrefix(same_tenant, "tenant-a"), 2 * bs());
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, FreedCachedBlocksAreReusedByALaterHit) {
  Init(16, 0);
  const std::vector<TokenId> prompt = Tokens(3 * bs() + 3, 10);
  Sequence& a = Prefilled(prompt);
  const std::vector<BlockId> a_blocks = a.block_table().blocks();
  Release(a);
  EXPECT_TRUE(a.block_table().empty());
  EXPECT_EQ(kv_->num_free_device_blocks(), 16);
  EXPECT_EQ(kv_->device_pool().num_cached_free_blocks(), 3);
  ExpectInvariants();

  Sequence& b = NewSeq(prompt);
  Sequence* group[] = {&b};
  EXPECT_EQ(kv_->CanAdmit(group, ""), AllocStatus::kOk);
  EXPECT_EQ(kv_->AttachCachedPrefix(b, ""), 3 * bs());
  EXPECT_THAT(b.block_table().blocks(), ElementsAre(a_blocks[0], a_blocks[1], a_blocks[2]));
  EXPECT_EQ(kv_->num_free_device_blocks(), 13);  // revived blocks left the free pool
  EXPECT_EQ(kv_->device_pool().num_cached_free_blocks(), 0);
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, RecomputeAfterPreemptionHitsItsOwnPromptAndOutput) {
  Init(16, 0);
  Sequence& s = Prefilled(Tokens(2 * bs() - 1, 0));
  for (int i = 0; i < bs() + 2; ++i) Decode(s, 5000 + i);
  s.AppendToken(42, 0.0f);  // the sampled token, not computed yet
  const int32_t full = s.num_computed_tokens() / bs();
  const std::vector<BlockId> before = s.block_table().blocks();
  Release(s);
  EXPECT_EQ(kv_->AttachCachedPrefix(s, ""), full * bs());
  for (int32_t i = 0; i < full; ++i) EXPECT_EQ(s.block_table()[i], before[i]);
  Compute(s, s.num_pending_tokens());
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, CachedBlocksAreEvictedOnlyWhenThePoolNeedsThemLeastRecentFirst) {
  Init(8, 0);
  const std::vector<TokenId> prompt = Tokens(3 * bs() + 1, 0);
  Sequence& a = Prefilled(prompt);  // 4 blocks, 3 cached
  const std::vector<BlockId> a_blocks = a.block_table().blocks();
  Release(a);
  ASSERT_EQ(kv_->device_pool().num_cached_free_blocks(), 3);

  // Five plain free blocks remain; a 5-block sequence takes exactly those.
  Sequence& c = Prefilled(Tokens(5 * bs() - 1, 50000));
  EXPECT_EQ(kv_->device_pool().num_cached_free_blocks(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(kv_->device_pool().is_cached(a_blocks[i]));
    EXPECT_EQ(kv_->device_pool().ref_count(a_blocks[i]), 0);
  }
  for (BlockId id : c.block_table().blocks()) {
    EXPECT_NE(id, a_blocks[0]);
    EXPECT_NE(id, a_blocks[1]);
    EXPECT_NE(id, a_blocks[2]);
  }

  // One more block: the least recently freed cached block goes. Free()
  // releases the tail first, so the deepest prefix block is the oldest.
  Sequence& d = Prefilled(Tokens(1, 90000));
  EXPECT_EQ(d.block_table()[0], a_blocks[2]);
  EXPECT_FALSE(kv_->device_pool().is_cached(a_blocks[2]));
  EXPECT_EQ(kv_->device_pool().num_cached_free_blocks(), 2);

  Sequence& b = NewSeq(prompt);
  EXPECT_EQ(kv_->AttachCachedPrefix(b, ""), 2 * bs());
  EXPECT_THAT(b.block_table().blocks(), ElementsAre(a_blocks[0], a_blocks[1]));
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, PrefixCachingDisabledNeverHits) {
  Init(16, 0, /*caching=*/false);
  const std::vector<TokenId> prompt = Tokens(3 * bs(), 0);
  Sequence& a = Prefilled(prompt);
  for (BlockId id : a.block_table().blocks()) EXPECT_FALSE(kv_->device_pool().is_cached(id));
  Sequence& b = NewSeq(prompt);
  EXPECT_EQ(kv_->AttachCachedPrefix(b, ""), 0);
  EXPECT_EQ(kv_->prefix_cache_stats().hits, 0);
  Release(a);
  EXPECT_EQ(kv_->device_pool().num_cached_free_blocks(), 0);
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, DivergedForksCacheTheirOwnBlocks) {
  Init(32, 0);
  Sequence& parent = Prefilled(Tokens(bs() / 2, 0));
  Sequence& child = ForkOf(parent);
  for (int i = 0; i < bs(); ++i) {
    Decode(parent, 100 + i);
    Decode(child, 200 + i);
  }
  // Each filled its own copy of block 0 and its own block 1.
  EXPECT_NE(parent.block_table()[0], child.block_table()[0]);
  EXPECT_TRUE(kv_->device_pool().is_cached(parent.block_table()[0]));
  EXPECT_TRUE(kv_->device_pool().is_cached(child.block_table()[0]));
  // 1.5 blocks computed: block 0 is full and cached, block 1 is not.
  std::vector<TokenId> child_tokens = child.tokens();
  child_tokens.push_back(1);
  Sequence& again = NewSeq(child_tokens);
  EXPECT_EQ(kv_->AttachCachedPrefix(again, ""), bs());
  EXPECT_EQ(again.block_table()[0], child.block_table()[0]);
  ExpectInvariants();
}

// ----------------------------------------------------------------- admission

TEST_P(KvCacheManagerTest, CanAdmitOkLaterNever) {
  Init(10, 0);
  Sequence& fits = NewSeq(Tokens(4 * bs(), 0));  // 4 blocks + 1 for the next token
  Sequence* g1[] = {&fits};
  EXPECT_EQ(kv_->CanAdmit(g1, ""), AllocStatus::kOk);

  Sequence& too_long = NewSeq(Tokens(10 * bs(), 0));  // 11 blocks with the next token
  Sequence* g2[] = {&too_long};
  EXPECT_EQ(kv_->CanAdmit(g2, ""), AllocStatus::kNever);
  Sequence& whole_pool = NewSeq(Tokens(10 * bs() - 1, 0));
  Sequence* g3[] = {&whole_pool};
  EXPECT_EQ(kv_->CanAdmit(g3, ""), AllocStatus::kOk);

  Prefilled(Tokens(6 * bs(), 77777));                     // holds 6 blocks
  EXPECT_EQ(kv_->CanAdmit(g1, ""), AllocStatus::kLater);  // needs 5, 4 free
  EXPECT_EQ(kv_->CanAdmit(g2, ""), AllocStatus::kNever);
  EXPECT_EQ(kv_->CanAdmit(g3, ""), AllocStatus::kLater);
  Sequence& small = NewSeq(Tokens(3 * bs() - 1, 0));
  Sequence* g4[] = {&small};
  EXPECT_EQ(kv_->CanAdmit(g4, ""), AllocStatus::kOk);
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, CanAdmitCountsEverySequenceOfTheGroup) {
  Init(10, 0);
  Prefilled(Tokens(1, 99999));                // one block in use: 9 free
  Sequence& a = NewSeq(Tokens(2 * bs(), 0));  // 3 blocks each
  Sequence& b = NewSeq(Tokens(2 * bs(), 1000));
  Sequence& c = NewSeq(Tokens(2 * bs(), 2000));
  Sequence& d = NewSeq(Tokens(2 * bs(), 3000));
  Sequence* three[] = {&a, &b, &c};
  Sequence* four[] = {&a, &b, &c, &d};
  EXPECT_EQ(kv_->CanAdmit(three, ""), AllocStatus::kOk);
  EXPECT_EQ(kv_->CanAdmit(four, ""), AllocStatus::kLater);
}

// A group whose sequences fit one by one but not together (an n > 1 request
// resumed by recompute no longer shares its prompt blocks): kLater, also on
// an idle pool, where the scheduler must turn it into never (nothing runs
// that could free a block).
TEST_P(KvCacheManagerTest, CanAdmitAGroupThatFitsOnlyOneByOne) {
  Init(10, 0);
  Sequence& a = NewSeq(Tokens(5 * bs(), 0));  // 6 blocks each
  Sequence& b = NewSeq(Tokens(5 * bs(), 1000));
  Sequence* group[] = {&a, &b};
  Sequence* one[] = {&a};
  EXPECT_EQ(kv_->CanAdmit(one, ""), AllocStatus::kOk);
  EXPECT_EQ(kv_->CanAdmit(group, ""), AllocStatus::kLater);
  Prefilled(Tokens(1, 99999));
  EXPECT_EQ(kv_->CanAdmit(group, ""), AllocStatus::kLater);
}

// Cached blocks on an idle pool are free blocks: a group that fits through
// them is ok.
TEST_P(KvCacheManagerTest, CanAdmitOnAnIdlePoolCountsCachedBlocks) {
  Init(10, 0);
  const std::vector<TokenId> prompt = Tokens(4 * bs(), 0);
  Sequence& a = Prefilled(prompt);
  Release(a);  // idle, 4 cached free blocks
  std::vector<TokenId> t1 = prompt, t2 = prompt;
  t1.push_back(1);
  t2.push_back(2);
  Sequence& s1 = NewSeq(t1);
  Sequence& s2 = NewSeq(t2);
  Sequence* group[] = {&s1, &s2};
  EXPECT_EQ(kv_->CanAdmit(group, ""), AllocStatus::kOk);  // 4 shared + 1 + 1
}

TEST_P(KvCacheManagerTest, CanAdmitKeepsTheWatermarkFree) {
  Init(100, 0, true, /*watermark=*/0.1);
  ASSERT_EQ(kv_->watermark_blocks(), 10);
  Prefilled(Tokens(40 * bs(), 0));                        // 40 blocks used, 60 free
  Sequence& ok = NewSeq(Tokens(50 * bs() - 1, 1 << 20));  // 50 blocks: leaves 10
  Sequence& later = NewSeq(Tokens(50 * bs(), 1 << 21));   // 51 blocks: leaves 9
  Sequence* g1[] = {&ok};
  Sequence* g2[] = {&later};
  EXPECT_EQ(kv_->CanAdmit(g1, ""), AllocStatus::kOk);
  EXPECT_EQ(kv_->CanAdmit(g2, ""), AllocStatus::kLater);
}

// A request that fits the pool but not the pool minus the watermark could
// never be admitted: it must be kNever, not kLater forever (a vLLM hang).
TEST_P(KvCacheManagerTest, CanAdmitIsNeverWhenOnlyTheWatermarkStandsInTheWay) {
  Init(100, 0, true, /*watermark=*/0.1);
  Sequence& at_limit = NewSeq(Tokens(90 * bs() - 1, 0));  // 90 blocks
  Sequence& over = NewSeq(Tokens(90 * bs(), 0));          // 91 blocks
  Sequence* g1[] = {&at_limit};
  Sequence* g2[] = {&over};
  EXPECT_EQ(kv_->CanAdmit(g1, ""), AllocStatus::kOk);
  EXPECT_EQ(kv_->CanAdmit(g2, ""), AllocStatus::kNever);
}

TEST_P(KvCacheManagerTest, CanAdmitCountsHitsOnHeldBlocksAsFree) {
  Init(10, 0);
  const std::vector<TokenId> prompt = Tokens(6 * bs() + 1, 0);
  Prefilled(prompt);  // 7 blocks held, 6 of them cached
  Sequence& same = NewSeq(prompt);
  Sequence& other = NewSeq(Tokens(6 * bs() + 1, 5000));
  Sequence* g_same[] = {&same};
  Sequence* g_other[] = {&other};
  // Needs 7 blocks; 6 are hits on held blocks, so 1 new one: 3 are free.
  // The other prompt needs all 7 from the free pool.
  EXPECT_EQ(kv_->CanAdmit(g_same, ""), AllocStatus::kOk);
  EXPECT_EQ(kv_->CanAdmit(g_other, ""), AllocStatus::kLater);
  const int32_t free_before = kv_->num_free_device_blocks();
  // Asking changes nothing.
  EXPECT_EQ(kv_->num_free_device_blocks(), free_before);
  EXPECT_TRUE(same.block_table().empty());
  EXPECT_EQ(same.num_computed_tokens(), 0);
  ExpectInvariants();
  kv_->AttachCachedPrefix(same, "");
  Compute(same, same.num_pending_tokens());
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, CanAdmitCountsHitsOnFreeCachedBlocksAsTaken) {
  Init(10, 0);
  const std::vector<TokenId> prompt = Tokens(6 * bs() + 1, 0);
  Sequence& a = Prefilled(prompt);
  Release(a);                              // 6 cached blocks, all free
  Prefilled(Tokens(4 * bs() - 1, 99999));  // takes the 4 plain blocks: 6 free, all cached
  ASSERT_EQ(kv_->device_pool().num_cached_free_blocks(), 6);
  Sequence& same = NewSeq(prompt);
  Sequence* g[] = {&same};
  // Needs 7 blocks, 6 of them hits on free blocks: all 7 come out of the 6 free.
  EXPECT_EQ(kv_->CanAdmit(g, ""), AllocStatus::kLater);
  // A 6-block prompt (5 hits + 1) fits exactly.
  Sequence& shorter = NewSeq(std::vector<TokenId>(prompt.begin(), prompt.begin() + 5 * bs() + 1));
  Sequence* g2[] = {&shorter};
  EXPECT_EQ(kv_->CanAdmit(g2, ""), AllocStatus::kOk);
  kv_->AttachCachedPrefix(shorter, "");
  Compute(shorter, shorter.num_pending_tokens());
  ExpectInvariants();
}

// Sequences of one group (e.g. a recompute-preempted n > 1 request) hitting
// the same free cached prompt blocks take each of those blocks once.
TEST_P(KvCacheManagerTest, CanAdmitCountsASharedFreeCachedHitOnce) {
  Init(10, 0);
  const std::vector<TokenId> prompt = Tokens(4 * bs(), 0);
  Sequence& a = Prefilled(prompt);
  Release(a);  // 4 cached blocks, all free
  std::vector<TokenId> t1 = prompt;
  std::vector<TokenId> t2 = prompt;
  t1.push_back(1);
  t2.push_back(2);
  Sequence& s1 = NewSeq(t1);
  Sequence& s2 = NewSeq(t2);
  Sequence* group[] = {&s1, &s2};
  // Each: 4 hit blocks (shared) + 1 block for the rest and the next token.
  // Taken: 4 + 1 + 1 = 6 of 10.
  ASSERT_EQ(kv_->CanAdmit(group, ""), AllocStatus::kOk);
  kv_->AttachCachedPrefix(s1, "");
  kv_->AttachCachedPrefix(s2, "");
  Compute(s1, s1.num_pending_tokens());
  Compute(s2, s2.num_pending_tokens());
  EXPECT_EQ(kv_->num_free_device_blocks(), 4);
  ExpectInvariants();

  // With the pool tighter, the answer is still exact: holding 4 more blocks
  // leaves exactly the 6 needed.
  Release(s1);
  Release(s2);
  Sequence& other = Prefilled(Tokens(4 * bs(), 1 << 20));
  ASSERT_EQ(kv_->num_free_device_blocks(), 6);
  EXPECT_EQ(kv_->CanAdmit(group, ""), AllocStatus::kOk);
  kv_->AttachCachedPrefix(s1, "");
  kv_->AttachCachedPrefix(s2, "");
  Compute(s1, s1.num_pending_tokens());
  Compute(s2, s2.num_pending_tokens());
  EXPECT_EQ(kv_->num_free_device_blocks(), 0);
  (void)other;
  ExpectInvariants();
}

// ------------------------------------------------------------ BlocksNeeded

TEST_P(KvCacheManagerTest, BlocksNeededMatchesAllocateSlotsForAGroupSharingAPartialBlock) {
  Init(32, 0);
  Sequence& parent = Prefilled(Tokens(bs() + bs() / 2, 0));
  std::vector<Sequence*> group = {&parent};
  for (int i = 0; i < 3; ++i) group.push_back(&ForkOf(parent));
  for (Sequence* s : group) s->AppendToken(7, 0.0f);
  const std::vector<int32_t> counts(group.size(), 1);
  // Three of the four copy the shared partial block; the last writes in place.
  EXPECT_EQ(kv_->BlocksNeeded(group, counts, 0), 3);
  const int32_t free_before = kv_->num_free_device_blocks();
  std::vector<BlockCopy> copies;
  for (Sequence* s : group) {
    ASSERT_TRUE(kv_->AllocateSlots(*s, 1, 0, "", &copies));
    s->set_num_computed_tokens(s->num_computed_tokens() + 1);
  }
  EXPECT_EQ(free_before - kv_->num_free_device_blocks(), 3);
  EXPECT_EQ(copies.size(), 3u);
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, BlocksNeededCountsCopiesAndNewBlocksTogether) {
  Init(32, 0);
  Sequence& parent = Prefilled(Tokens(bs() - 1, 0));
  Sequence& child = ForkOf(parent);
  std::vector<Sequence*> group = {&parent, &child};
  // Two tokens each: finish the shared block (copy for the first) and start a new one.
  for (Sequence* s : group) {
    s->AppendToken(1, 0.0f);
    s->AppendToken(2, 0.0f);
  }
  const std::vector<int32_t> counts = {2, 2};
  EXPECT_EQ(kv_->BlocksNeeded(group, counts, 0), 3);
  // Zero tokens for one of them: it neither copies nor grows.
  EXPECT_EQ(kv_->BlocksNeeded(group, std::vector<int32_t>{2, 0}, 0), 2);
  EXPECT_EQ(kv_->BlocksNeeded(group, std::vector<int32_t>{0, 0}, 0), 0);
  // A reservation adds its blocks for each.
  EXPECT_EQ(kv_->BlocksNeeded(group, std::vector<int32_t>{0, 0}, 4 * bs()), 6);

  const int32_t free_before = kv_->num_free_device_blocks();
  std::vector<BlockCopy> copies;
  for (Sequence* s : group) {
    ASSERT_TRUE(kv_->AllocateSlots(*s, 2, 0, "", &copies));
    s->set_num_computed_tokens(s->num_computed_tokens() + 2);
  }
  EXPECT_EQ(free_before - kv_->num_free_device_blocks(), 3);
  EXPECT_EQ(copies.size(), 1u);
  ExpectInvariants();
}

// ----------------------------------------------------------------- swapping

TEST_P(KvCacheManagerTest, SwapOutAndInPreserveSharing) {
  Init(16, 8);
  Sequence& parent = Prefilled(Tokens(2 * bs() + bs() / 2, 0));
  Sequence& c1 = ForkOf(parent);
  Sequence& c2 = ForkOf(parent);
  std::vector<Sequence*> group = {&parent, &c1, &c2};
  for (Sequence* s : group) Decode(*s, 3);  // two copy, the last writes in place
  // Unique blocks: 2 shared full + 3 private last blocks.
  ASSERT_EQ(kv_->NumUniqueBlocks(group), 5);
  std::vector<std::vector<BlockId>> device_before;
  for (Sequence* s : group) device_before.push_back(s->block_table().blocks());
  ASSERT_TRUE(kv_->CanSwapOut(group));

  std::vector<BlockCopy> out;
  kv_->SwapOut(group, &out);
  ASSERT_EQ(out.size(), 5u);  // each unique block once
  absl::flat_hash_map<BlockId, BlockId> to_host;
  std::set<BlockId> dsts;
  for (const BlockCopy& op : out) {
    EXPECT_TRUE(to_host.emplace(op.src, op.dst).second) << "block " << op.src << " copied twice";
    EXPECT_TRUE(dsts.insert(op.dst).second);
    EXPECT_GE(op.dst, 0);
    EXPECT_LT(op.dst, 8);
  }
  for (size_t s = 0; s < group.size(); ++s) {
    const BlockTable& t = group[s]->block_table();
    EXPECT_TRUE(t.on_host());
    ASSERT_EQ(t.size(), static_cast<int32_t>(device_before[s].size()));
    for (int32_t i = 0; i < t.size(); ++i) EXPECT_EQ(t[i], to_host.at(device_before[s][i]));
  }
  EXPECT_EQ(kv_->host_pool().ref_count(parent.block_table()[0]), 3);
  EXPECT_EQ(kv_->host_pool().ref_count(parent.block_table()[2]), 1);
  EXPECT_EQ(kv_->host_pool().num_free_blocks(), 3);
  EXPECT_EQ(kv_->num_free_device_blocks(), 16);
  ExpectInvariants();

  std::vector<std::vector<BlockId>> host_tables;
  for (Sequence* s : group) host_tables.push_back(s->block_table().blocks());
  ASSERT_TRUE(kv_->CanSwapIn(group));
  std::vector<BlockCopy> in;
  kv_->SwapIn(group, &in);
  ASSERT_EQ(in.size(), 5u);
  absl::flat_hash_map<BlockId, BlockId> to_device;
  for (const BlockCopy& op : in) {
    EXPECT_TRUE(to_device.emplace(op.src, op.dst).second);
  }
  for (size_t s = 0; s < group.size(); ++s) {
    const BlockTable& t = group[s]->block_table();
    EXPECT_FALSE(t.on_host());
    EXPECT_EQ(t.synced_prefix(), 0);  // the workers get the whole table again
    for (int32_t i = 0; i < t.size(); ++i) EXPECT_EQ(t[i], to_device.at(host_tables[s][i]));
  }
  EXPECT_EQ(parent.block_table()[0], c1.block_table()[0]);
  EXPECT_EQ(parent.block_table()[1], c2.block_table()[1]);
  EXPECT_NE(parent.block_table()[2], c1.block_table()[2]);
  EXPECT_EQ(kv_->device_pool().ref_count(parent.block_table()[0]), 3);
  EXPECT_EQ(kv_->num_free_device_blocks(), 11);
  EXPECT_EQ(kv_->host_pool().num_free_blocks(), 8);
  ExpectInvariants();

  // Growing on after the round trip works as before.
  for (Sequence* s : group) EXPECT_THAT(Decode(*s, 4), IsEmpty());
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, CanSwapOutIsFalseWhenTheHostPoolIsShort) {
  Init(16, 4);
  Sequence& parent = Prefilled(Tokens(2 * bs() + 1, 0));
  Sequence& child = ForkOf(parent);
  Decode(parent, 1);
  Decode(child, 2);
  std::vector<Sequence*> group = {&parent, &child};
  ASSERT_EQ(kv_->NumUniqueBlocks(group), 4);
  EXPECT_TRUE(kv_->CanSwapOut(group));
  Sequence& other = Prefilled(Tokens(bs(), 500));
  std::vector<Sequence*> others = {&other};
  std::vector<BlockCopy> ops;
  kv_->SwapOut(others, &ops);  // takes one host block
  EXPECT_FALSE(kv_->CanSwapOut(group));
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, CanSwapInNeedsRoomToGrowAndTheWatermark) {
  Init(20, 20, true, /*watermark=*/0.1);  // 2 watermark blocks
  Sequence& parent = Prefilled(Tokens(2 * bs() + 1, 0));
  Sequence& child = ForkOf(parent);
  std::vector<Sequence*> group = {&parent, &child};
  std::vector<BlockCopy> ops;
  kv_->SwapOut(group, &ops);  // 3 unique blocks on the host
  // Fill the device so that exactly 3 + 2 (one per sequence) + 2 remain free.
  Sequence& filler = Prefilled(Tokens(13 * bs(), 1 << 20));
  ASSERT_EQ(kv_->num_free_device_blocks(), 7);
  EXPECT_TRUE(kv_->CanSwapIn(group));
  filler.AppendToken(1, 0.0f);
  Compute(filler, 1);  // one block more
  EXPECT_FALSE(kv_->CanSwapIn(group));
  ExpectInvariants();
}

// What was swapped out came from the device pool, so an idle device pool can
// always take it back; otherwise a group whose blocks plus growing room cross
// the watermark would stay swapped forever.
TEST_P(KvCacheManagerTest, IdleDevicePoolAlwaysTakesBackASwappedGroup) {
  Init(10, 20, true, /*watermark=*/0.1);
  Sequence& parent = Prefilled(Tokens(8 * bs() + 1, 0));  // 9 blocks
  Sequence& child = ForkOf(parent);
  std::vector<Sequence*> group = {&parent, &child};
  std::vector<BlockCopy> ops;
  kv_->SwapOut(group, &ops);
  ASSERT_EQ(kv_->device_pool().num_used_blocks(), 0);
  EXPECT_TRUE(kv_->CanSwapIn(group));
  kv_->SwapIn(group, &ops);
  EXPECT_EQ(kv_->num_free_device_blocks(), 1);
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, SwapOutOfBlocksSharedThroughThePrefixCache) {
  Init(16, 16);
  const std::vector<TokenId> prompt = Tokens(2 * bs() + 1, 0);
  Sequence& a = Prefilled(prompt);
  Sequence& b = Prefilled(prompt);  // shares a's two full blocks
  ASSERT_EQ(b.block_table()[0], a.block_table()[0]);
  std::vector<Sequence*> group_b = {&b};
  std::vector<BlockCopy> ops;
  kv_->SwapOut(group_b, &ops);
  EXPECT_EQ(ops.size(), 3u);
  // a still holds its blocks; b holds host copies.
  EXPECT_EQ(kv_->device_pool().ref_count(a.block_table()[0]), 1);
  EXPECT_TRUE(b.block_table().on_host());
  ExpectInvariants();
  kv_->SwapIn(group_b, &ops);
  EXPECT_NE(b.block_table()[0], a.block_table()[0]);  // its own device copy now
  Decode(a, 1);
  Decode(b, 2);
  ExpectInvariants();
}

// ----------------------------------------------------------------- free

TEST_P(KvCacheManagerTest, FreeReturnsEverything) {
  Init(32, 16);
  const std::vector<TokenId> prompt = Tokens(2 * bs() + 3, 0);
  Sequence& a = Prefilled(prompt);
  Sequence& b = Prefilled(prompt);
  Sequence& c = ForkOf(a);
  Decode(c, 9);
  Decode(a, 8);
  Sequence& d = Prefilled(Tokens(3 * bs(), 1000));
  std::vector<Sequence*> swapped = {&d};
  std::vector<BlockCopy> ops;
  kv_->SwapOut(swapped, &ops);
  ExpectInvariants();
  for (Sequence* s : {&a, &b, &c, &d}) {
    Release(*s);
    EXPECT_TRUE(s->block_table().empty());
    EXPECT_FALSE(s->block_table().on_host());
    ExpectInvariants();
  }
  ExpectAllFree();
  // Freeing an empty table is harmless.
  Release(a);
  ExpectAllFree();
}

// ------------------------------------------------------------- invariants

TEST_P(KvCacheManagerTest, CheckInvariantsCatchesARefCountThatDoesNotMatchTheTables) {
  Init(16, 4);
  Sequence& a = Prefilled(Tokens(2 * bs() + 1, 0));
  Sequence& b = Prefilled(Tokens(bs() + 1, 1000));
  ExpectInvariants();
  // b claims a's first block without a reference.
  b.block_table().Append(a.block_table()[0]);
  absl::Status s = kv_->CheckInvariants(Live());
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("device pool"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("ref count"));
}

TEST_P(KvCacheManagerTest, CheckInvariantsCatchesASwappedBlockId) {
  Init(16, 4);
  Sequence& a = Prefilled(Tokens(2 * bs() + 1, 0));
  Prefilled(Tokens(bs() + 1, 1000));
  // The right number of blocks, but one id swapped for a free block.
  BlockId free_block = kNoBlock;
  for (BlockId id = 0; id < 16; ++id) {
    if (kv_->device_pool().ref_count(id) == 0) free_block = id;
  }
  a.block_table().Replace(1, free_block);
  EXPECT_FALSE(kv_->CheckInvariants(Live()).ok());
}

TEST_P(KvCacheManagerTest, CheckInvariantsCatchesAMissingHolder) {
  Init(16, 4);
  Sequence& a = Prefilled(Tokens(2 * bs() + 1, 0));
  Prefilled(Tokens(bs() + 1, 1000));
  const std::vector<const Sequence*> only_a = {&a};
  EXPECT_FALSE(kv_->CheckInvariants(only_a).ok());
}

TEST_P(KvCacheManagerTest, CheckInvariantsCatchesABadBlockIdAndTooFewBlocks) {
  Init(16, 4);
  Sequence& a = Prefilled(Tokens(2 * bs() + 1, 0));
  a.block_table().Append(16);
  absl::Status s = kv_->CheckInvariants(Live());
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("bad block"));

  Init(16, 4);
  seqs_.clear();
  Sequence& b = Prefilled(Tokens(2 * bs() + 1, 0));
  b.set_num_computed_tokens(3 * bs() + 1);  // more than its 3 blocks hold
  s = kv_->CheckInvariants(Live());
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("computed tokens"));
}

TEST_P(KvCacheManagerTest, CheckInvariantsCatchesAHostTableOutOfStep) {
  Init(16, 4);
  Sequence& a = Prefilled(Tokens(2 * bs() + 1, 0));
  std::vector<Sequence*> g = {&a};
  std::vector<BlockCopy> ops;
  kv_->SwapOut(g, &ops);
  ExpectInvariants();
  // Claim the host blocks are device blocks: both pools disagree now.
  a.block_table().Reset(a.block_table().blocks(), /*on_host=*/false);
  EXPECT_FALSE(kv_->CheckInvariants(Live()).ok());
}

}  // namespace
}  // namespace folio
