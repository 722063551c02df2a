// Sliding-window models: the scheduler gives back the blocks no query can see
// any more, so long sequences hold about window / block_size + 1 blocks
// instead of their whole length. The simulated worker "attends" over each
// query's window only (as the kernels do) and checks every slot it reads, so
// releasing a block still in a window fails at once. Outputs must equal a run
// without the window's savings, through forks, beams, swap and recompute.

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "scheduler/simulated_worker.h"
#include "tests/scheduler/scheduler_test_util.h"

namespace folio {
namespace {

using test::ExpectDrained;
using test::MakeRequest;
using test::TestConfig;

struct Outcome {
  std::vector<std::vector<TokenId>> tokens;  // by request, then sequence index
  int32_t peak_used_blocks = 0;
  int64_t released = 0;
  int64_t preemptions = 0;
};

// Runs `specs` to completion; every step's used blocks feed the peak.
Outcome RunAll(const SchedulerConfig& config, const std::vector<RequestSpec>& specs) {
  Outcome run;
  auto s = test::MakeScheduler(config);
  SimulatedWorker w(test::WorkerOptions(config));
  for (const RequestSpec& spec : specs) {
    const absl::Status added = s->AddRequest(spec);
    EXPECT_TRUE(added.ok()) << added;
  }
  auto out = test::RunToCompletion(*s, w, 20000, [&](const StepPlan&, const Scheduler& sched) {
    run.peak_used_blocks =
        std::max(run.peak_used_blocks, sched.kv_cache().device_pool().num_used_blocks());
  });
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return run;
  for (const RequestSpec& spec : specs) {
    for (const auto& [index, seq] : out->at(spec.id).sequences) {
      run.tokens.push_back(seq.token_ids);
    }
  }
  run.released = s->stats().num_window_released_blocks;
  run.preemptions = s->stats().num_preemptions_recompute + s->stats().num_preemptions_swap;
  ExpectDrained(*s);
  return run;
}

TEST(SchedulerWindowTest, LongSequencesHoldOnlyTheirWindow) {
  for (int32_t window : {1, 7, 8, 21, 64}) {
    SCOPED_TRACE(testing::Message() << "window " << window);
    SchedulerConfig c = TestConfig(256);  // block size 8
    c.sliding_window = window;
    std::vector<RequestSpec> specs;
    for (RequestId id = 0; id < 4; ++id) specs.push_back(MakeRequest(id, 30 + 7 * id, 400));
    const Outcome windowed = RunAll(c, specs);
    c.sliding_window = 0;
    c.num_device_blocks = 1024;  // room for everything without releases
    const Outcome full = RunAll(c, specs);
    EXPECT_EQ(windowed.tokens, full.tokens);
    EXPECT_GT(windowed.released, 0);
    EXPECT_EQ(windowed.preemptions, 0);
    // Each sequence: the blocks its window spans, its last block, and the
    // one a chunk or decode may open.
    const int32_t per_seq = (window + 7) / 8 + 2;
    EXPECT_LE(windowed.peak_used_blocks, 4 * per_seq + 4 * 6);  // + prompt blocks in flight
    EXPECT_GT(full.peak_used_blocks, 4 * 50);
  }
}

// The same workload in a pool too small for it without releases, and with
// forks (n, best_of, beams), swap or recompute preemption and shared prompts:
// the outputs equal a roomy run without a window.
TEST(SchedulerWindowTest, ForksBeamsAndPreemptionKeepTheOutputs) {
  for (PreemptionMode mode : {PreemptionMode::kSwap, PreemptionMode::kRecompute}) {
    SCOPED_TRACE(mode == PreemptionMode::kSwap ? "swap" : "recompute");
    SchedulerConfig c = TestConfig(48);
    c.num_host_blocks = mode == PreemptionMode::kSwap ? 96 : 0;
    c.preemption_mode = mode;
    c.sliding_window = 20;
    std::vector<RequestSpec> specs;
    for (RequestId id = 0; id < 8; ++id) {
      RequestSpec r = MakeRequest(id, 20 + 3 * id, 120 + 10 * id, /*base=*/id % 3);
      if (id % 4 == 1) {
        r.sampling.n = 2;
        r.sampling.best_of = 3;
      } else if (id % 4 == 2) {
        r.sampling.beam_width = 3;
        r.sampling.n = 2;
      } else if (id % 4 == 3) {
        r.sampling.n = 3;
        r.sampling.best_of = 3;
      }
      specs.push_back(r);
    }
    const Outcome windowed = RunAll(c, specs);
    SchedulerConfig roomy = TestConfig(2048);
    const Outcome full = RunAll(roomy, specs);
    EXPECT_EQ(windowed.tokens, full.tokens);
    EXPECT_GT(windowed.released, 0);
    EXPECT_LE(windowed.peak_used_blocks, 48);
    EXPECT_GT(windowed.preemptions, 0);  // the pool was tight, even with releases
  }
}

}  // namespace
}  // namespace folio
