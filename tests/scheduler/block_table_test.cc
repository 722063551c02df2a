// BlockTable (logical -> physical blocks, plus what the workers have not seen
// yet) and Sequence (tokens, computed prefix, fork).

#include "scheduler/block_table.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/sequence.h"

namespace folio {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(BlockTableTest, StartsEmptyOnDevice) {
  BlockTable t;
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.size(), 0);
  EXPECT_FALSE(t.on_host());
  EXPECT_EQ(t.synced_prefix(), 0);
}

TEST(BlockTableTest, AppendAndIndex) {
  BlockTable t;
  t.Append(7);
  t.Append(3);
  t.Append(9);
  EXPECT_EQ(t.size(), 3);
  EXPECT_FALSE(t.empty());
  EXPECT_EQ(t[0], 7);
  EXPECT_EQ(t[1], 3);
  EXPECT_EQ(t[2], 9);
  EXPECT_EQ(t.back(), 9);
  EXPECT_THAT(t.blocks(), ElementsAre(7, 3, 9));
}

TEST(BlockTableTest, SyncedPrefixTracksWhatWorkersHaveSeen) {
  BlockTable t;
  t.Append(1);
  t.Append(2);
  EXPECT_EQ(t.synced_prefix(), 0);
  t.MarkSynced();
  EXPECT_EQ(t.synced_prefix(), 2);
  // Appends leave the synced prefix: the diff is the new tail.
  t.Append(3);
  t.Append(4);
  EXPECT_EQ(t.synced_prefix(), 2);
  t.MarkSynced();
  EXPECT_EQ(t.synced_prefix(), 4);
  t.MarkUnsynced();
  EXPECT_EQ(t.synced_prefix(), 0);
}

TEST(BlockTableTest, ReplaceMovesTheSyncedPrefixBackToTheReplacedIndex) {
  BlockTable t;
  for (BlockId id : {10, 11, 12, 13}) t.Append(id);
  t.MarkSynced();
  t.Replace(3, 20);  // copy-on-write of the last block
  EXPECT_THAT(t.blocks(), ElementsAre(10, 11, 12, 20));
  EXPECT_EQ(t.synced_prefix(), 3);
  t.Replace(1, 21);
  EXPECT_EQ(t.synced_prefix(), 1);
  t.Replace(2, 22);  // a later index does not raise it again
  EXPECT_EQ(t.synced_prefix(), 1);
  EXPECT_THAT(t.blocks(), ElementsAre(10, 21, 22, 20));
  t.MarkSynced();
  EXPECT_EQ(t.synced_prefix(), 4);
}

TEST(BlockTableTest, ResetReplacesEverythingAndNeedsAFullResend) {
  BlockTable t;
  t.Append(1);
  t.Append(2);
  t.MarkSynced();
  t.Reset({5, 6, 7}, /*on_host=*/true);
  EXPECT_TRUE(t.on_host());
  EXPECT_THAT(t.blocks(), ElementsAre(5, 6, 7));
  EXPECT_EQ(t.synced_prefix(), 0);
  t.MarkSynced();
  t.Reset({8}, /*on_host=*/false);
  EXPECT_FALSE(t.on_host());
  EXPECT_EQ(t.synced_prefix(), 0);
}

TEST(BlockTableTest, ClearEmptiesAndReturnsToDevice) {
  BlockTable t;
  t.Reset({1, 2}, /*on_host=*/true);
  t.MarkSynced();
  t.Clear();
  EXPECT_TRUE(t.empty());
  EXPECT_FALSE(t.on_host());
  EXPECT_EQ(t.synced_prefix(), 0);
  t.Append(4);
  EXPECT_EQ(t.synced_prefix(), 0);  // a cleared table is not synced
}

TEST(SequenceTest, HoldsPromptAndOutput) {
  const std::vector<TokenId> prompt = {5, 6, 7};
  Sequence s(/*id=*/42, /*request_id=*/9, /*index=*/1, prompt);
  EXPECT_EQ(s.id(), 42);
  EXPECT_EQ(s.request_id(), 9);
  EXPECT_EQ(s.index(), 1);
  EXPECT_EQ(s.num_tokens(), 3);
  EXPECT_EQ(s.num_prompt_tokens(), 3);
  EXPECT_EQ(s.num_output_tokens(), 0);
  EXPECT_THAT(s.tokens(), ElementsAre(5, 6, 7));
  EXPECT_THAT(std::vector<TokenId>(s.prompt_tokens().begin(), s.prompt_tokens().end()),
              ElementsAre(5, 6, 7));
  EXPECT_TRUE(s.output_tokens().empty());
  EXPECT_EQ(s.num_computed_tokens(), 0);
  EXPECT_EQ(s.num_pending_tokens(), 3);
  EXPECT_TRUE(s.block_table().empty());
  EXPECT_THAT(s.block_hashes(), IsEmpty());
  EXPECT_FALSE(s.is_finished());
  EXPECT_EQ(s.finish_reason(), FinishReason::kNone);

  s.AppendToken(8, -0.5f);
  s.AppendToken(9, -1.25f);
  EXPECT_EQ(s.num_tokens(), 5);
  EXPECT_EQ(s.num_prompt_tokens(), 3);
  EXPECT_EQ(s.num_output_tokens(), 2);
  EXPECT_THAT(std::vector<TokenId>(s.output_tokens().begin(), s.output_tokens().end()),
              ElementsAre(8, 9));
  EXPECT_THAT(s.output_logprobs(), ElementsAre(-0.5f, -1.25f));
  EXPECT_DOUBLE_EQ(s.cumulative_logprob(), -1.75);

  s.set_num_computed_tokens(4);
  EXPECT_EQ(s.num_pending_tokens(), 1);
}

TEST(SequenceTest, ForkCopiesStateButNotBlocks) {
  const std::vector<TokenId> prompt = {1, 2, 3, 4};
  Sequence parent(1, 7, 0, prompt);
  parent.AppendToken(5, -1.0f);
  parent.set_num_computed_tokens(4);
  parent.block_table().Append(3);
  parent.block_table().Append(8);
  parent.block_hashes().push_back(HashBlockTokens(nullptr, prompt, ""));
  parent.set_num_streamed_tokens(1);
  parent.set_known_to_workers(true);

  std::unique_ptr<Sequence> child = parent.Fork(/*child_id=*/2, /*child_index=*/3);
  EXPECT_EQ(child->id(), 2);
  EXPECT_EQ(child->request_id(), 7);
  EXPECT_EQ(child->index(), 3);
  EXPECT_EQ(child->tokens(), parent.tokens());
  EXPECT_EQ(child->num_prompt_tokens(), 4);
  EXPECT_EQ(child->num_output_tokens(), 1);
  EXPECT_EQ(child->output_logprobs(), parent.output_logprobs());
  EXPECT_DOUBLE_EQ(child->cumulative_logprob(), -1.0);
  EXPECT_EQ(child->num_computed_tokens(), 4);
  EXPECT_EQ(child->block_hashes(), parent.block_hashes());
  EXPECT_EQ(child->num_streamed_tokens(), 1);
  // The KvCacheManager shares the blocks; the workers learn of the child anew.
  EXPECT_TRUE(child->block_table().empty());
  EXPECT_FALSE(child->known_to_workers());
  EXPECT_FALSE(child->is_finished());

  // Independent afterwards.
  child->AppendToken(6, -2.0f);
  EXPECT_EQ(parent.num_tokens(), 5);
  EXPECT_EQ(child->num_tokens(), 6);
  EXPECT_DOUBLE_EQ(parent.cumulative_logprob(), -1.0);
  EXPECT_DOUBLE_EQ(child->cumulative_logprob(), -3.0);
}

TEST(SequenceTest, FinishAndReasonNames) {
  Sequence s(1, 1, 0, std::vector<TokenId>{1});
  s.Finish(FinishReason::kStop);
  EXPECT_TRUE(s.is_finished());
  EXPECT_EQ(s.finish_reason(), FinishReason::kStop);
  EXPECT_STREQ(FinishReasonName(FinishReason::kNone), "none");
  EXPECT_STREQ(FinishReasonName(FinishReason::kLength), "length");
  EXPECT_STREQ(FinishReasonName(FinishReason::kStop), "stop");
  EXPECT_STREQ(FinishReasonName(FinishReason::kEos), "eos");
  EXPECT_STREQ(FinishReasonName(FinishReason::kAbort), "abort");
  EXPECT_STREQ(FinishReasonName(FinishReason::kError), "error");
}

}  // namespace
}  // namespace folio
