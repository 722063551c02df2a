// KvCacheManager: slot allocation, fork + copy-on-write, freeing, and the
// invariant checks. Prefix caching is in kv_cache_manager_prefix_test.cc,
// admission, BlocksNeeded and swapping in kv_cache_manager_admission_test.cc.
// Every test runs at block sizes 8, 16 and 32.

#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/kv_cache_manager.h"
#include "tests/scheduler/kv_cache_manager_test_util.h"

namespace folio {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using test::KvCacheManagerTest;
using test::Tokens;

KV_CACHE_MANAGER_BLOCK_SIZES();

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
