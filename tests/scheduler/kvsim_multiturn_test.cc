// folio-kvsim's multi-turn workload (scheduler/kvsim/multiturn.h): on a device
// pool too small for the conversations' histories the host tier turns
// recomputed history into swapped-back blocks (the simulated worker checks
// every slot they bring back), on a pool large enough it changes nothing,
// and its per-step budget bounds what it moves. Every run ends with all
// blocks back (SimulateMultiTurn checks).
#include <gtest/gtest.h>

#include "scheduler/kvsim/multiturn.h"

namespace folio::kvsim {
namespace {

MultiTurnWorkload SmallWorkload() {
  MultiTurnWorkload w;
  w.conversations = 24;
  w.concurrency = 6;
  w.system_prompt_len = 64;
  w.mean_turns = 4;
  w.mean_user_len = 32;
  w.mean_reply_len = 24;
  return w;
}

SimulationOptions Pool(int64_t token_slots) {
  SimulationOptions o;
  o.token_slots = token_slots;
  o.block_size = 16;
  o.max_model_len = 512;
  o.max_num_batched_tokens = 512;
  o.seed = 3;
  return o;
}

MultiTurnResult Play(int64_t device_slots, bool tier, int32_t budget = -1) {
  absl::StatusOr<MultiTurnResult> r =
      SimulateMultiTurn(SmallWorkload(), Pool(device_slots), /*host_token_slots=*/32768, tier,
                        budget);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : MultiTurnResult{};
}

TEST(KvsimMultiTurnTest, TheHostTierRecoversWhatASmallDevicePoolEvicts) {
  const MultiTurnResult off = Play(512, false);
  const MultiTurnResult on = Play(512, true);
  EXPECT_EQ(off.failed_requests, 0);
  EXPECT_EQ(on.failed_requests, 0);
  EXPECT_GT(off.requests, 24);  // more than one turn per conversation
  EXPECT_EQ(on.requests, off.requests);
  EXPECT_EQ(on.prompt_tokens, off.prompt_tokens);  // same conversations
  EXPECT_EQ(off.host_hit_tokens, 0);
  EXPECT_EQ(off.blocks_to_host, 0);
  EXPECT_GT(on.host_hit_tokens, 0);
  EXPECT_GT(on.blocks_from_host, 0);
  EXPECT_GT(on.hit_tokens, off.hit_tokens);
  EXPECT_GT(on.hit_rate(), off.hit_rate() + 0.1) << off.hit_rate() << " -> " << on.hit_rate();
  EXPECT_LT(on.computed_prompt_tokens, off.computed_prompt_tokens);
}

TEST(KvsimMultiTurnTest, ALargeDevicePoolNeedsNoHostTier) {
  const MultiTurnResult off = Play(1 << 20, false);
  const MultiTurnResult on = Play(1 << 20, true);
  EXPECT_EQ(on.host_hit_tokens, 0);
  EXPECT_EQ(on.blocks_to_host, 0);  // nothing is ever evicted
  EXPECT_EQ(on.hit_tokens, off.hit_tokens);
  EXPECT_GT(off.hit_rate(), 0.5);
}

TEST(KvsimMultiTurnTest, TheStepBudgetBoundsTheTier) {
  const MultiTurnResult unbounded = Play(512, true, /*budget=*/0);
  const MultiTurnResult one = Play(512, true, /*budget=*/1);
  EXPECT_EQ(unbounded.blocks_over_budget, 0);
  EXPECT_GT(one.blocks_over_budget, 0);
  EXPECT_LT(one.host_hit_tokens, unbounded.host_hit_tokens);
  EXPECT_LE(one.blocks_from_host, one.steps);  // at most one block a step
  EXPECT_EQ(one.failed_requests, 0);
}

TEST(KvsimMultiTurnTest, BadWorkloadsAreRefused) {
  MultiTurnWorkload w = SmallWorkload();
  w.concurrency = 0;
  EXPECT_FALSE(SimulateMultiTurn(w, Pool(2048), 4096, true).ok());
  w = SmallWorkload();
  w.system_prompt_len = 2000;
  absl::StatusOr<MultiTurnResult> r = SimulateMultiTurn(w, Pool(2048), 4096, true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("system prompt"), std::string::npos);
}

}  // namespace
}  // namespace folio::kvsim
