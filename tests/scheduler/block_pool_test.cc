// BlockPool: O(1) allocate/free with reference counts, a free queue that hands
// out plain blocks before cached ones and evicts cached content least recently
// freed first, and the prefix-cache hash map.

#include "scheduler/block_pool.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace folio {
namespace {

using ::testing::HasSubstr;

BlockHash HashOf(int32_t n) {
  const TokenId tokens[] = {n, n + 1, n + 2};
  return HashBlockTokens(nullptr, tokens, "");
}

// The reference counts a correct pool must have, derived from the ids the
// test holds (one entry per reference).
std::vector<int32_t> Refs(const BlockPool& pool, const std::vector<BlockId>& held) {
  std::vector<int32_t> refs(pool.num_blocks(), 0);
  for (BlockId id : held) ++refs[id];
  return refs;
}

TEST(BlockPoolTest, StartsAllFree) {
  BlockPool pool(8, /*enable_caching=*/true);
  EXPECT_EQ(pool.num_blocks(), 8);
  EXPECT_EQ(pool.num_free_blocks(), 8);
  EXPECT_EQ(pool.num_used_blocks(), 0);
  EXPECT_EQ(pool.num_cached_free_blocks(), 0);
  EXPECT_TRUE(pool.caching_enabled());
  for (BlockId id = 0; id < 8; ++id) {
    EXPECT_EQ(pool.ref_count(id), 0);
    EXPECT_FALSE(pool.is_cached(id));
  }
  EXPECT_TRUE(pool.CheckConsistency(Refs(pool, {})).ok());
}

TEST(BlockPoolTest, AllocateHandsOutDistinctBlocksUntilEmpty) {
  BlockPool pool(5, false);
  std::vector<BlockId> held;
  for (int i = 0; i < 5; ++i) {
    const BlockId id = pool.Allocate();
    ASSERT_NE(id, kNoBlock);
    EXPECT_EQ(pool.ref_count(id), 1);
    for (BlockId other : held) EXPECT_NE(other, id);
    held.push_back(id);
    EXPECT_EQ(pool.num_free_blocks(), 5 - i - 1);
    EXPECT_EQ(pool.num_used_blocks(), i + 1);
    ASSERT_TRUE(pool.CheckConsistency(Refs(pool, held)).ok());
  }
  EXPECT_EQ(pool.Allocate(), kNoBlock);
  EXPECT_EQ(pool.Allocate(), kNoBlock);  // and stays so, changing nothing
  EXPECT_EQ(pool.num_free_blocks(), 0);
  EXPECT_TRUE(pool.CheckConsistency(Refs(pool, held)).ok());
}

TEST(BlockPoolTest, EmptyPool) {
  BlockPool pool(0, true);
  EXPECT_EQ(pool.num_blocks(), 0);
  EXPECT_EQ(pool.Allocate(), kNoBlock);
  EXPECT_TRUE(pool.CheckConsistency({}).ok());
}

TEST(BlockPoolTest, RefCountsKeepABlockUntilTheLastHolderLetsGo) {
  BlockPool pool(3, false);
  const BlockId id = pool.Allocate();
  pool.IncRef(id);
  pool.IncRef(id);
  EXPECT_EQ(pool.ref_count(id), 3);
  EXPECT_TRUE(pool.CheckConsistency(Refs(pool, {id, id, id})).ok());
  pool.DecRef(id);
  pool.DecRef(id);
  EXPECT_EQ(pool.ref_count(id), 1);
  EXPECT_EQ(pool.num_free_blocks(), 2);
  EXPECT_TRUE(pool.CheckConsistency(Refs(pool, {id})).ok());
  pool.DecRef(id);
  EXPECT_EQ(pool.ref_count(id), 0);
  EXPECT_EQ(pool.num_free_blocks(), 3);
  EXPECT_TRUE(pool.CheckConsistency(Refs(pool, {})).ok());
}

TEST(BlockPoolTest, FreedPlainBlockIsHandedOutNext) {
  BlockPool pool(4, false);
  const BlockId a = pool.Allocate();
  const BlockId b = pool.Allocate();
  pool.DecRef(a);
  // A plain freed block goes to the head: it is reused at once (LIFO), which
  // keeps the working set small.
  EXPECT_EQ(pool.Allocate(), a);
  pool.DecRef(b);
  EXPECT_EQ(pool.Allocate(), b);
}

TEST(BlockPoolTest, PlainFreeBlocksBeforeCachedOnesThenLeastRecentlyFreedCached) {
  BlockPool pool(4, true);
  const BlockId a = pool.Allocate();
  const BlockId b = pool.Allocate();
  const BlockId c = pool.Allocate();
  const BlockId d = pool.Allocate();
  pool.RegisterHash(a, HashOf(1));
  pool.RegisterHash(b, HashOf(2));
  EXPECT_TRUE(pool.is_cached(a));
  EXPECT_TRUE(pool.is_cached(b));
  EXPECT_FALSE(pool.is_cached(c));
  pool.DecRef(a);  // cached, freed first: least recently freed
  pool.DecRef(b);  // cached, freed second
  pool.DecRef(c);  // plain
  EXPECT_EQ(pool.num_free_blocks(), 3);
  EXPECT_EQ(pool.num_cached_free_blocks(), 2);
  ASSERT_TRUE(pool.CheckConsistency(Refs(pool, {d})).ok());

  EXPECT_EQ(pool.Allocate(), c);  // the plain block, though freed last
  EXPECT_EQ(pool.Lookup(HashOf(1)), a);
  EXPECT_EQ(pool.Lookup(HashOf(2)), b);
  EXPECT_EQ(pool.num_cached_free_blocks(), 2);

  EXPECT_EQ(pool.Allocate(), a);  // evicts the least recently freed cached block
  EXPECT_FALSE(pool.is_cached(a));
  EXPECT_EQ(pool.Lookup(HashOf(1)), kNoBlock);  // eviction removes the hash
  EXPECT_EQ(pool.Lookup(HashOf(2)), b);
  EXPECT_EQ(pool.num_cached_free_blocks(), 1);
  ASSERT_TRUE(pool.CheckConsistency(Refs(pool, {a, c, d})).ok());

  EXPECT_EQ(pool.Allocate(), b);
  EXPECT_EQ(pool.Lookup(HashOf(2)), kNoBlock);
  EXPECT_EQ(pool.num_cached_free_blocks(), 0);
  EXPECT_EQ(pool.Allocate(), kNoBlock);
  EXPECT_TRUE(pool.CheckConsistency(Refs(pool, {a, b, c, d})).ok());
}

TEST(BlockPoolTest, EvictionOrderFollowsFreeOrderNotAllocationOrder) {
  BlockPool pool(3, true);
  const BlockId a = pool.Allocate();
  const BlockId b = pool.Allocate();
  const BlockId c = pool.Allocate();
  pool.RegisterHash(a, HashOf(1));
  pool.RegisterHash(b, HashOf(2));
  pool.RegisterHash(c, HashOf(3));
  pool.DecRef(c);
  pool.DecRef(a);
  pool.DecRef(b);
  EXPECT_EQ(pool.num_cached_free_blocks(), 3);
  EXPECT_EQ(pool.Allocate(), c);
  EXPECT_EQ(pool.Allocate(), a);
  EXPECT_EQ(pool.Allocate(), b);
}

TEST(BlockPoolTest, HitOnFreeCachedBlockRevivesItAndRefreshesItsRecency) {
  BlockPool pool(3, true);
  const BlockId a = pool.Allocate();
  const BlockId b = pool.Allocate();
  const BlockId c = pool.Allocate();
  pool.RegisterHash(a, HashOf(1));
  pool.RegisterHash(b, HashOf(2));
  pool.RegisterHash(c, HashOf(3));
  pool.DecRef(a);
  pool.DecRef(b);
  pool.DecRef(c);
  ASSERT_EQ(pool.num_free_blocks(), 3);

  // Revive the middle of the queue (b), then the head (a), then the tail (c).
  ASSERT_EQ(pool.Lookup(HashOf(2)), b);
  pool.IncRef(b);
  EXPECT_EQ(pool.ref_count(b), 1);
  EXPECT_EQ(pool.num_free_blocks(), 2);
  EXPECT_EQ(pool.num_cached_free_blocks(), 2);
  EXPECT_TRUE(pool.is_cached(b));
  EXPECT_EQ(pool.Lookup(HashOf(2)), b);  // still findable while held
  ASSERT_TRUE(pool.CheckConsistency(Refs(pool, {b})).ok());
  pool.IncRef(a);
  ASSERT_TRUE(pool.CheckConsistency(Refs(pool, {a, b})).ok());
  pool.IncRef(c);
  EXPECT_EQ(pool.num_free_blocks(), 0);
  EXPECT_EQ(pool.num_cached_free_blocks(), 0);
  ASSERT_TRUE(pool.CheckConsistency(Refs(pool, {a, b, c})).ok());
  EXPECT_EQ(pool.Allocate(), kNoBlock);

  // Freed again in a new order: the LRU order is the new free order.
  pool.DecRef(b);
  pool.DecRef(c);
  pool.DecRef(a);
  ASSERT_TRUE(pool.CheckConsistency(Refs(pool, {})).ok());
  EXPECT_EQ(pool.Allocate(), b);
  EXPECT_EQ(pool.Allocate(), c);
  EXPECT_EQ(pool.Allocate(), a);
}

TEST(BlockPoolTest, HeldCachedBlockIsNeverEvicted) {
  BlockPool pool(2, true);
  const BlockId a = pool.Allocate();
  pool.RegisterHash(a, HashOf(7));
  const BlockId b = pool.Allocate();
  pool.DecRef(b);
  EXPECT_EQ(pool.Allocate(), b);
  EXPECT_EQ(pool.Allocate(), kNoBlock);
  EXPECT_EQ(pool.Lookup(HashOf(7)), a);
  EXPECT_TRUE(pool.is_cached(a));
}

TEST(BlockPoolTest, DuplicateRegisterHashLeavesSecondBlockUncached) {
  BlockPool pool(3, true);
  const BlockId a = pool.Allocate();
  const BlockId b = pool.Allocate();
  pool.RegisterHash(a, HashOf(5));
  pool.RegisterHash(b, HashOf(5));
  EXPECT_TRUE(pool.is_cached(a));
  EXPECT_FALSE(pool.is_cached(b));
  EXPECT_EQ(pool.Lookup(HashOf(5)), a);
  ASSERT_TRUE(pool.CheckConsistency(Refs(pool, {a, b})).ok());
  // The duplicate frees as a plain block: to the head, not the cached tail.
  pool.DecRef(b);
  EXPECT_EQ(pool.num_cached_free_blocks(), 0);
  pool.DecRef(a);
  EXPECT_EQ(pool.num_cached_free_blocks(), 1);
  EXPECT_EQ(pool.Allocate(), b);
  EXPECT_EQ(pool.Lookup(HashOf(5)), a);  // allocating b did not touch a's entry
  ASSERT_TRUE(pool.CheckConsistency(Refs(pool, {b})).ok());
}

TEST(BlockPoolTest, RegisterHashTwiceWithSameHashIsIdempotent) {
  BlockPool pool(2, true);
  const BlockId a = pool.Allocate();
  pool.RegisterHash(a, HashOf(1));
  pool.RegisterHash(a, HashOf(1));
  EXPECT_TRUE(pool.is_cached(a));
  EXPECT_EQ(pool.Lookup(HashOf(1)), a);
  EXPECT_TRUE(pool.CheckConsistency(Refs(pool, {a})).ok());
}

TEST(BlockPoolTest, AfterEvictionTheContentCanBeCachedAgainElsewhere) {
  BlockPool pool(1, true);
  const BlockId a = pool.Allocate();
  pool.RegisterHash(a, HashOf(1));
  pool.DecRef(a);
  EXPECT_EQ(pool.Allocate(), a);  // evicts hash 1
  pool.RegisterHash(a, HashOf(2));
  EXPECT_EQ(pool.Lookup(HashOf(1)), kNoBlock);
  EXPECT_EQ(pool.Lookup(HashOf(2)), a);
  EXPECT_TRUE(pool.CheckConsistency(Refs(pool, {a})).ok());
}

TEST(BlockPoolTest, CachingDisabledIgnoresRegisterHash) {
  BlockPool pool(2, /*enable_caching=*/false);
  EXPECT_FALSE(pool.caching_enabled());
  const BlockId a = pool.Allocate();
  pool.RegisterHash(a, HashOf(1));
  EXPECT_FALSE(pool.is_cached(a));
  EXPECT_EQ(pool.Lookup(HashOf(1)), kNoBlock);
  pool.DecRef(a);
  EXPECT_EQ(pool.num_cached_free_blocks(), 0);
  EXPECT_TRUE(pool.CheckConsistency(Refs(pool, {})).ok());
}

TEST(BlockPoolTest, CheckConsistencyDetectsWrongExpectedRefCount) {
  BlockPool pool(4, true);
  const BlockId a = pool.Allocate();
  const BlockId b = pool.Allocate();
  pool.IncRef(b);
  ASSERT_TRUE(pool.CheckConsistency(Refs(pool, {a, b, b})).ok());

  // One holder too few for b.
  absl::Status s = pool.CheckConsistency(Refs(pool, {a, b}));
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("block " + std::to_string(b)));
  // A holder of a block the pool thinks is free.
  s = pool.CheckConsistency(Refs(pool, {a, b, b, 3}));
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("block 3"));
  // a's holder missing.
  EXPECT_FALSE(pool.CheckConsistency(Refs(pool, {b, b})).ok());
  // Wrong vector size.
  EXPECT_FALSE(pool.CheckConsistency(std::vector<int32_t>(3, 0)).ok());
}

TEST(BlockPoolDeathTest, IncRefOnFreePlainBlockDies) {
  BlockPool pool(2, true);
  EXPECT_DEATH(pool.IncRef(0), "CHECK failed");
}

TEST(BlockPoolDeathTest, DecRefOnFreeBlockDies) {
  BlockPool pool(2, true);
  EXPECT_DEATH(pool.DecRef(1), "CHECK failed");
}

TEST(BlockPoolDeathTest, RegisterHashOnFreeBlockDies) {
  BlockPool pool(2, true);
  EXPECT_DEATH(pool.RegisterHash(0, HashOf(1)), "CHECK failed");
}

TEST(BlockPoolDeathTest, RegisteringDifferentContentInACachedBlockDies) {
  BlockPool pool(2, true);
  const BlockId a = pool.Allocate();
  pool.RegisterHash(a, HashOf(1));
  EXPECT_DEATH(pool.RegisterHash(a, HashOf(2)), "CHECK failed");
}

// Many blocks, many churn rounds: every operation is O(1), so this is quick;
// an O(n) free list search would make it take minutes.
TEST(BlockPoolTest, LargePoolChurnStaysConsistent) {
  constexpr int32_t kBlocks = 200000;
  BlockPool pool(kBlocks, true);
  std::vector<BlockId> held;
  held.reserve(kBlocks);
  for (int32_t i = 0; i < kBlocks; ++i) held.push_back(pool.Allocate());
  EXPECT_EQ(pool.Allocate(), kNoBlock);
  for (int32_t i = 0; i < kBlocks; i += 2) pool.RegisterHash(held[i], HashOf(i));
  for (int round = 0; round < 5; ++round) {
    for (BlockId id : held) pool.DecRef(id);
    ASSERT_EQ(pool.num_free_blocks(), kBlocks);
    held.clear();
    for (int32_t i = 0; i < kBlocks / 2; ++i) held.push_back(pool.Allocate());
  }
  // Plain blocks first: the first half of every round came from plain blocks,
  // so cached content survives as long as plain blocks remain.
  EXPECT_TRUE(pool.CheckConsistency(Refs(pool, held)).ok());
  for (BlockId id : held) pool.DecRef(id);
  EXPECT_EQ(pool.num_free_blocks(), kBlocks);
  EXPECT_EQ(pool.num_cached_free_blocks(), kBlocks / 2);
  EXPECT_TRUE(pool.CheckConsistency(Refs(pool, {})).ok());
}

}  // namespace
}  // namespace folio
