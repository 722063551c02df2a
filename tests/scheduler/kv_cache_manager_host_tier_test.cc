// KvCacheManager's host tier of the prefix cache: an evicted cached device
// block is copied to the host (a swap-out op) and a later prefix hit there
// comes back by swap-in; swapped-out sequences take precedence over the
// copies; without the tier nothing moves. Every test runs at block sizes 8,
// 16 and 32.

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/kv_cache_manager.h"
#include "tests/scheduler/kv_cache_manager_test_util.h"

namespace folio {
namespace {

using ::testing::IsEmpty;
using ::testing::SizeIs;
using test::KvCacheManagerTest;
using test::Tokens;

KV_CACHE_MANAGER_BLOCK_SIZES();

// The ops of one step's end: the copies of evicted blocks to the host.
std::vector<BlockCopy> FinishStep(KvCacheManager& kv) {
  std::vector<BlockCopy> swap_out;
  kv.FinishStep(&swap_out);
  return swap_out;
}

TEST_P(KvCacheManagerTest, EvictedCachedBlocksGoToTheHostAndComeBackBySwapIn) {
  Init(/*device_blocks=*/4, /*host_blocks=*/8, true, 0.0, /*host_prefix_cache=*/true);
  ASSERT_TRUE(kv_->host_prefix_cache());
  const std::vector<TokenId> prompt = Tokens(2 * bs() + 1, 10);  // 2 full blocks + 1 token
  Sequence& a = Prefilled(prompt);
  const BlockId a0 = a.block_table()[0], a1 = a.block_table()[1];
  EXPECT_THAT(FinishStep(*kv_), IsEmpty());  // nothing evicted yet
  Release(a);

  // Another prompt takes the whole pool: a's cached blocks are evicted, and
  // copied out first.
  Sequence& b = Prefilled(Tokens(4 * bs(), 500));
  ExpectInvariants();  // the copies' host blocks are held for this step
  const std::vector<BlockCopy> out = FinishStep(*kv_);
  ASSERT_THAT(out, SizeIs(2));
  // Tail first (Free's order): a's second block is evicted first.
  EXPECT_EQ(out[0].src, a1);
  EXPECT_EQ(out[1].src, a0);
  EXPECT_NE(out[0].dst, out[1].dst);
  EXPECT_EQ(kv_->prefix_cache_stats().blocks_to_host, 2);
  EXPECT_EQ(kv_->host_pool().num_cached_free_blocks(), 2);
  ExpectInvariants();
  Release(b);

  // The same prompt again: a miss on the device, a hit on the host.
  Sequence& again = NewSeq(prompt);
  Sequence* group[] = {&again};
  EXPECT_EQ(kv_->CanAdmit(group, ""), AllocStatus::kOk);
  std::vector<BlockCopy> in;
  EXPECT_EQ(kv_->AttachCachedPrefix(again, "", &in), 2 * bs());
  ASSERT_THAT(in, SizeIs(2));
  EXPECT_EQ(in[0].src, out[1].dst);  // block 0's copy
  EXPECT_EQ(in[1].src, out[0].dst);  // block 1's copy
  EXPECT_EQ(in[0].dst, again.block_table()[0]);
  EXPECT_EQ(in[1].dst, again.block_table()[1]);
  EXPECT_EQ(again.num_computed_tokens(), 2 * bs());
  EXPECT_EQ(kv_->prefix_cache_stats().host_hits, 2 * bs());
  EXPECT_EQ(kv_->prefix_cache_stats().blocks_from_host, 2);
  // The blocks they came back into are cached on the device again.
  EXPECT_TRUE(kv_->device_pool().is_cached(again.block_table()[0]));
  EXPECT_TRUE(kv_->device_pool().is_cached(again.block_table()[1]));
  ExpectInvariants();
  // b's cached blocks, evicted for them, went to the host in their turn.
  EXPECT_THAT(FinishStep(*kv_), SizeIs(2));
  EXPECT_EQ(kv_->prefix_cache_stats().blocks_to_host, 4);
  // Its last token takes one more block: a third of b's goes to the host.
  Compute(again, again.num_pending_tokens());
  EXPECT_THAT(FinishStep(*kv_), SizeIs(1));
  EXPECT_EQ(kv_->prefix_cache_stats().blocks_to_host, 5);
  ExpectInvariants();
  Release(again);
  EXPECT_THAT(FinishStep(*kv_), IsEmpty());
  ExpectAllFree();
}

TEST_P(KvCacheManagerTest, WithoutTheHostTierEvictedBlocksAreGone) {
  Init(4, 8, true, 0.0, /*host_prefix_cache=*/false);
  EXPECT_FALSE(kv_->host_prefix_cache());
  const std::vector<TokenId> prompt = Tokens(2 * bs() + 1, 10);
  Release(Prefilled(prompt));
  Release(Prefilled(Tokens(4 * bs(), 500)));
  EXPECT_THAT(FinishStep(*kv_), IsEmpty());
  Sequence& again = NewSeq(prompt);
  std::vector<BlockCopy> in;
  EXPECT_EQ(kv_->AttachCachedPrefix(again, "", &in), 0);
  EXPECT_THAT(in, IsEmpty());
  EXPECT_EQ(kv_->prefix_cache_stats().blocks_to_host, 0);
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, ASwapOutEvictsHostCopiesRatherThanFail) {
  Init(/*device_blocks=*/3, /*host_blocks=*/2, true, 0.0, /*host_prefix_cache=*/true);
  const std::vector<TokenId> prompt = Tokens(2 * bs() + 1, 10);
  Sequence& a = Prefilled(prompt);
  const BlockId a0 = a.block_table()[0];
  Release(a);
  // Two blocks: a's partial one (plain) and a's second (evicted, copied out).
  Sequence& running = Prefilled(Tokens(2 * bs(), 500));
  EXPECT_THAT(FinishStep(*kv_), SizeIs(1));
  EXPECT_EQ(kv_->host_pool().num_cached_free_blocks(), 1);
  // Preempting it by swap needs both host blocks: the copy makes way.
  Sequence* group[] = {&running};
  ASSERT_TRUE(kv_->CanSwapOut(group));
  std::vector<BlockCopy> swap_out;
  kv_->SwapOut(group, &swap_out);
  EXPECT_THAT(swap_out, SizeIs(2));
  EXPECT_EQ(kv_->host_pool().num_cached_free_blocks(), 0);
  ExpectInvariants();
  // The prompt finds its first block on the device, its second nowhere.
  Sequence& again = NewSeq(prompt);
  std::vector<BlockCopy> in;
  EXPECT_EQ(kv_->AttachCachedPrefix(again, "", &in), bs());
  EXPECT_THAT(in, IsEmpty());
  EXPECT_EQ(again.block_table()[0], a0);
  EXPECT_THAT(FinishStep(*kv_), IsEmpty());
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, TheStepBudgetDropsCopiesBeyondIt) {
  Init(/*device_blocks=*/4, /*host_blocks=*/8, true, 0.0, /*host_prefix_cache=*/true,
       /*host_tier_blocks_per_step=*/1);
  const std::vector<TokenId> prompt = Tokens(2 * bs() + 1, 10);
  Sequence& a = Prefilled(prompt);
  const BlockId a1 = a.block_table()[1];
  EXPECT_THAT(FinishStep(*kv_), IsEmpty());
  Release(a);
  // Both of a's cached blocks are evicted in one step: one copy fits.
  Release(Prefilled(Tokens(4 * bs(), 500)));
  const std::vector<BlockCopy> out = FinishStep(*kv_);
  ASSERT_THAT(out, SizeIs(1));
  EXPECT_EQ(out[0].src, a1);  // evicted first
  EXPECT_EQ(kv_->prefix_cache_stats().blocks_to_host, 1);
  EXPECT_EQ(kv_->prefix_cache_stats().blocks_over_budget, 1);
  // Block 0 is gone, so the chain is too: the host's copy of block 1 is unreachable.
  Sequence& again = NewSeq(prompt);
  std::vector<BlockCopy> in;
  EXPECT_EQ(kv_->AttachCachedPrefix(again, "", &in), 0);
  EXPECT_THAT(in, IsEmpty());
  ExpectInvariants();
}

TEST_P(KvCacheManagerTest, TheStepBudgetComputesHostHitsBeyondIt) {
  Init(/*device_blocks=*/4, /*host_blocks=*/8, true, 0.0, /*host_prefix_cache=*/true,
       /*host_tier_blocks_per_step=*/2);
  const std::vector<TokenId> prompt = Tokens(3 * bs() + 1, 10);  // 3 full blocks + 1 token
  Release(Prefilled(prompt));
  EXPECT_THAT(FinishStep(*kv_), IsEmpty());
  // Two steps evict a's three cached blocks, within the budget of each.
  Sequence& b = Prefilled(Tokens(2 * bs(), 500));  // the partial block and block 2
  EXPECT_THAT(FinishStep(*kv_), SizeIs(1));
  Sequence& c = Prefilled(Tokens(2 * bs(), 900));  // blocks 1 and 0
  EXPECT_THAT(FinishStep(*kv_), SizeIs(2));
  EXPECT_EQ(kv_->prefix_cache_stats().blocks_over_budget, 0);
  Release(b);
  Release(c);

  // All three are on the host, but one step swaps in two: the third is computed.
  Sequence& again = NewSeq(prompt);
  Sequence* group[] = {&again};
  EXPECT_EQ(kv_->CanAdmit(group, ""), AllocStatus::kOk);
  std::vector<BlockCopy> in;
  EXPECT_EQ(kv_->AttachCachedPrefix(again, "", &in), 2 * bs());
  EXPECT_THAT(in, SizeIs(2));
  EXPECT_EQ(again.num_pending_tokens(), bs() + 1);
  EXPECT_EQ(kv_->prefix_cache_stats().blocks_from_host, 2);
  EXPECT_EQ(kv_->prefix_cache_stats().blocks_over_budget, 1);
  ExpectInvariants();
  // The next step may swap in again: the same prompt finds all three.
  FinishStep(*kv_);
  Sequence& later = NewSeq(prompt);
  Sequence* later_group[] = {&later};
  EXPECT_EQ(kv_->CanAdmit(later_group, ""), AllocStatus::kOk);
  in.clear();
  EXPECT_EQ(kv_->AttachCachedPrefix(later, "", &in), 3 * bs());
  EXPECT_THAT(in, SizeIs(1));  // blocks 0 and 1 are shared with `again`
  EXPECT_EQ(later.block_table()[0], again.block_table()[0]);
  EXPECT_EQ(kv_->prefix_cache_stats().blocks_from_host, 3);
  FinishStep(*kv_);
  ExpectInvariants();
}

}  // namespace
}  // namespace folio
