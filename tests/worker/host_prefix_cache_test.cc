// The prefix cache's host tier end to end: a real scheduler and CPU worker
// (the demo model), a device pool too small to keep a prompt's blocks while
// other prompts run. The prompt's blocks move to the host and come back by
// swap-in, and its greedy tokens are the ones computed from scratch; every
// block is back in its pool at the end.

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "tests/worker/worker_test_util.h"
#include "worker/cpu_worker.h"

namespace folio {
namespace {

const std::string kDemo = std::string(FOLIO_SOURCE_DIR) + "/models/folio-demo";
constexpr int32_t kDeviceBlocks = 12, kHostBlocks = 32;

std::vector<TokenId> Prompt(int32_t n, TokenId base) {
  std::vector<TokenId> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(base + (i * 7) % 200);
  return t;
}

struct TierRun {
  std::vector<std::vector<TokenId>> first, again;  // the prompt's tokens, each time
  int64_t host_hit_tokens = 0;
  int64_t swap_in_ops = 0, swap_out_ops = 0;
};

TierRun Generate(bool host_tier) {
  TierRun run;
  CpuWorker::Options wo;
  wo.model_dir = kDemo;
  wo.num_device_blocks = kDeviceBlocks;
  wo.num_host_blocks = kHostBlocks;
  absl::StatusOr<std::unique_ptr<CpuWorker>> worker = CpuWorker::Create(wo);
  EXPECT_TRUE(worker.ok()) << worker.status();
  if (!worker.ok()) return run;
  SchedulerConfig config;
  config.block_size = 16;
  config.num_device_blocks = kDeviceBlocks;
  config.num_host_blocks = kHostBlocks;
  config.host_prefix_cache = host_tier;
  config.check_invariants = true;
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler = Scheduler::Create(config);
  EXPECT_TRUE(scheduler.ok()) << scheduler.status();
  if (!scheduler.ok()) return run;
  auto execute = [&](const StepPlan& plan) {
    run.swap_in_ops += static_cast<int64_t>(plan.swap_in.size());
    run.swap_out_ops += static_cast<int64_t>(plan.swap_out.size());
    return (*worker)->Execute(plan);
  };
  const testing::Prompt shared{Prompt(40, 3), 8};  // 2 full blocks and a part
  auto generate = [&](const std::vector<testing::Prompt>& prompts) {
    absl::StatusOr<std::vector<std::vector<TokenId>>> out =
        testing::RunGreedy(**scheduler, prompts, execute);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : std::vector<std::vector<TokenId>>{};
  };
  run.first = generate({shared});
  // Two prompts of 6 blocks each (with their outputs): all 12 blocks, so the
  // shared prompt's cached blocks are evicted.
  generate({{Prompt(88, 300), 8}, {Prompt(88, 600), 8}});
  run.again = generate({shared});
  run.host_hit_tokens = (*scheduler)->kv_cache().prefix_cache_stats().host_hits;
  const KvCacheManager& kv = (*scheduler)->kv_cache();
  EXPECT_EQ(kv.device_pool().num_free_blocks(), kDeviceBlocks);
  EXPECT_EQ(kv.host_pool().num_free_blocks(), kHostBlocks);
  return run;
}

TEST(HostPrefixCacheTest, EvictedPrefixComesBackFromTheHostWithTheSameTokens) {
  const TierRun on = Generate(/*host_tier=*/true);
  const TierRun off = Generate(/*host_tier=*/false);
  ASSERT_EQ(on.first.size(), 1u);
  ASSERT_EQ(off.first.size(), 1u);
  // Without the tier the prompt is computed again; with it, its two full
  // blocks come back from the host. The tokens are the same every time.
  EXPECT_EQ(off.host_hit_tokens, 0);
  EXPECT_EQ(off.swap_in_ops, 0);
  EXPECT_EQ(off.swap_out_ops, 0);
  EXPECT_EQ(on.host_hit_tokens, 32);
  EXPECT_EQ(on.swap_in_ops, 2);
  EXPECT_GE(on.swap_out_ops, 2);
  EXPECT_EQ(on.first, off.first);
  EXPECT_EQ(on.again, on.first);
  EXPECT_EQ(off.again, off.first);
}

}  // namespace
}  // namespace folio
