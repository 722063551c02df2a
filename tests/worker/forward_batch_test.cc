// BuildForwardBatch (worker/forward_batch.h): the batch both the CPU and the
// CUDA worker run, built from a plan and the worker's plan mirror.

#include "worker/forward_batch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/plan_mirror.h"
#include "common/step_plan.h"

namespace folio {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int32_t kBlockSize = 4;

NewSequenceData NewSeq(SequenceId id, std::vector<TokenId> prompt, std::vector<BlockId> blocks) {
  NewSequenceData n;
  n.seq_id = id;
  n.request_id = id * 10;
  n.prompt_token_ids = std::move(prompt);
  n.block_ids = std::move(blocks);
  return n;
}

ScheduledSequence Work(SequenceId id, int32_t start, std::vector<TokenId> tokens, SampleMode mode,
                       int32_t samples = 1) {
  ScheduledSequence w;
  w.seq_id = id;
  w.start_position = start;
  w.token_ids.assign(tokens.begin(), tokens.end());
  w.sample_mode = mode;
  w.num_samples = mode == SampleMode::kNone ? 0 : samples;
  return w;
}

TEST(BuildForwardBatchTest, MixedPrefillChunkPrefillAndDecode) {
  PlanMirror mirror(kBlockSize, /*num_device_blocks=*/16);
  StepPlan plan;
  // Sequence 1: a 6-token prompt, whole (blocks 7, 3).
  plan.new_sequences.push_back(NewSeq(1, {10, 11, 12, 13, 14, 15}, {7, 3}));
  // Sequence 2: a 9-token prompt, first chunk of 5 tokens (blocks 5, 9, 2).
  plan.new_sequences.push_back(NewSeq(2, {20, 21, 22, 23, 24, 25, 26, 27, 28}, {5, 9, 2}));
  plan.scheduled.push_back(Work(1, 0, {10, 11, 12, 13, 14, 15}, SampleMode::kSample));
  plan.scheduled.push_back(Work(2, 0, {20, 21, 22, 23, 24}, SampleMode::kNone));
  ASSERT_TRUE(mirror.ApplyMetadata(plan).ok());

  ForwardBatch batch;
  std::vector<const MirroredSequence*> seqs;
  ASSERT_TRUE(BuildForwardBatch(plan, mirror, kBlockSize, &batch, &seqs).ok());
  EXPECT_EQ(batch.num_tokens(), 11);
  EXPECT_EQ(batch.num_seqs(), 2);
  EXPECT_THAT(batch.token_ids, ElementsAre(10, 11, 12, 13, 14, 15, 20, 21, 22, 23, 24));
  EXPECT_THAT(batch.positions, ElementsAre(0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4));
  // Slot = block * block_size + offset.
  EXPECT_THAT(batch.slot_mapping,
              ElementsAre(28, 29, 30, 31, 12, 13, 20, 21, 22, 23, 36));
  EXPECT_THAT(batch.query_start, ElementsAre(0, 6, 11));
  EXPECT_THAT(batch.context_lens, ElementsAre(6, 5));
  // Both need two blocks for their context so far; unused entries are 0.
  EXPECT_EQ(batch.max_blocks_per_seq, 2);
  EXPECT_THAT(batch.block_tables, ElementsAre(7, 3, 5, 9));
  // Only sequence 1 samples: its last row.
  EXPECT_THAT(batch.logits_rows, ElementsAre(5));
  ASSERT_EQ(seqs.size(), 2u);
  EXPECT_EQ(seqs[0], mirror.Find(1));
  EXPECT_EQ(seqs[1], mirror.Find(2));

  // Next step: sequence 1 decodes its sampled token 99 (a new block 4 for
  // position 6 is not needed yet: 8 slots), sequence 2 finishes its prompt.
  StepPlan next;
  next.scheduled.push_back(Work(1, 6, {99}, SampleMode::kSample, 2));
  next.scheduled.push_back(Work(2, 5, {25, 26, 27, 28}, SampleMode::kSample));
  ASSERT_TRUE(mirror.ApplyMetadata(next).ok());
  ASSERT_TRUE(BuildForwardBatch(next, mirror, kBlockSize, &batch, &seqs).ok());
  EXPECT_THAT(batch.token_ids, ElementsAre(99, 25, 26, 27, 28));
  EXPECT_THAT(batch.positions, ElementsAre(6, 5, 6, 7, 8));
  EXPECT_THAT(batch.slot_mapping, ElementsAre(3 * 4 + 2, 9 * 4 + 1, 9 * 4 + 2, 9 * 4 + 3, 2 * 4));
  EXPECT_THAT(batch.query_start, ElementsAre(0, 1, 5));
  EXPECT_THAT(batch.context_lens, ElementsAre(7, 9));
  EXPECT_EQ(batch.max_blocks_per_seq, 3);
  EXPECT_THAT(batch.block_tables, ElementsAre(7, 3, 0, 5, 9, 2));
  EXPECT_THAT(batch.logits_rows, ElementsAre(0, 4));
  // The mirror learned the decoded token.
  EXPECT_THAT(mirror.Find(1)->tokens, ElementsAre(10, 11, 12, 13, 14, 15, 99));
}

TEST(BuildForwardBatchTest, EmptyPlanGivesAnEmptyBatchWithOneTableColumn) {
  PlanMirror mirror(kBlockSize, 4);
  StepPlan plan;
  ForwardBatch batch;
  batch.token_ids = {1, 2, 3};  // cleared
  ASSERT_TRUE(BuildForwardBatch(plan, mirror, kBlockSize, &batch, nullptr).ok());
  EXPECT_EQ(batch.num_tokens(), 0);
  EXPECT_EQ(batch.num_seqs(), 0);
  EXPECT_THAT(batch.query_start, ElementsAre(0));
  EXPECT_THAT(batch.block_tables, IsEmpty());
  EXPECT_EQ(batch.max_blocks_per_seq, 1);
  EXPECT_THAT(batch.logits_rows, IsEmpty());
}

TEST(BuildForwardBatchTest, DivergedPlansAreErrors) {
  PlanMirror mirror(kBlockSize, 8);
  StepPlan plan;
  plan.new_sequences.push_back(NewSeq(1, {10, 11, 12}, {1}));
  ASSERT_TRUE(mirror.ApplyMetadata(plan).ok());
  ForwardBatch batch;

  StepPlan unknown;
  unknown.scheduled.push_back(Work(7, 0, {1}, SampleMode::kSample));
  EXPECT_FALSE(BuildForwardBatch(unknown, mirror, kBlockSize, &batch, nullptr).ok());

  StepPlan wrong_token;
  wrong_token.scheduled.push_back(Work(1, 0, {10, 42, 12}, SampleMode::kSample));
  EXPECT_FALSE(BuildForwardBatch(wrong_token, mirror, kBlockSize, &batch, nullptr).ok());

  StepPlan no_room;  // 5 tokens, one block of 4
  no_room.scheduled.push_back(Work(1, 0, {10, 11, 12, 13, 14}, SampleMode::kSample));
  EXPECT_FALSE(BuildForwardBatch(no_room, mirror, kBlockSize, &batch, nullptr).ok());
}

}  // namespace
}  // namespace folio
