// KvCacheManager admission answers (CanAdmit: ok, later, never),
// BlocksNeeded, and swapping groups between the device and host pools.
// Every test runs at block sizes 8, 16 and 32.

#include <set>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/kv_cache_manager.h"
#include "tests/scheduler/kv_cache_manager_test_util.h"

namespace folio {
namespace {

using ::testing::IsEmpty;
using test::KvCacheManagerTest;
using test::Tokens;

KV_CACHE_MANAGER_BLOCK_SIZES();

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

}  // namespace
}  // namespace folio
