// KvCacheManager prefix caching: hits on cached whole blocks, where hits
// stop, salts, reuse and eviction of freed cached blocks, diverged forks.
// Every test runs at block sizes 8, 16 and 32.

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/kv_cache_manager.h"
#include "tests/scheduler/kv_cache_manager_test_util.h"

namespace folio {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using test::KvCacheManagerTest;
using test::Tokens;

KV_CACHE_MANAGER_BLOCK_SIZES();

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

}  // namespace
}  // namespace folio
