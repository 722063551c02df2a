// The CPU worker's step profile (worker/step_profile.h): attached, it counts
// decode and prompt steps apart and times every part of the forward pass;
// the tokens do not change; the report names each part.

#include "worker/step_profile.h"

#include <numeric>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "tests/worker/worker_test_util.h"
#include "worker/cpu_worker.h"

namespace folio {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kDemo = std::string(FOLIO_SOURCE_DIR) + "/models/folio-demo";

std::unique_ptr<CpuWorker> DemoWorker() {
  CpuWorker::Options o;
  o.model_dir = kDemo;
  o.num_device_blocks = 64;
  absl::StatusOr<std::unique_ptr<CpuWorker>> w = CpuWorker::Create(o);
  EXPECT_TRUE(w.ok()) << w.status();
  return w.ok() ? std::move(*w) : nullptr;
}

std::vector<std::vector<TokenId>> Generate(CpuWorker& worker) {
  SchedulerConfig config;
  config.block_size = 16;
  config.num_device_blocks = 64;
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler = Scheduler::Create(config);
  EXPECT_TRUE(scheduler.ok()) << scheduler.status();
  const std::vector<testing::Prompt> prompts = {
      {{1, 2, 3, 4, 5}, 6}, {{7, 8, 9}, 6}, {{10, 11, 12, 13, 14, 15, 16}, 6}};
  absl::StatusOr<std::vector<std::vector<TokenId>>> out = testing::RunGreedy(
      **scheduler, prompts, [&](const StepPlan& plan) { return worker.Execute(plan); });
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<std::vector<TokenId>>{};
}

TEST(StepProfileTest, TimesEveryPartOfDecodeAndPromptStepsApart) {
  std::unique_ptr<CpuWorker> worker = DemoWorker();
  ASSERT_NE(worker, nullptr);
  const std::vector<std::vector<TokenId>> plain = Generate(*worker);

  std::unique_ptr<CpuWorker> profiled = DemoWorker();
  ASSERT_NE(profiled, nullptr);
  StepProfile profile;
  profiled->set_step_profile(&profile);
  EXPECT_EQ(Generate(*profiled), plain);  // timing changes nothing

  // One prompt step (all three prompts fit the budget), then 5 decode steps
  // of 3 sequences: the first token of each comes from the prompt step.
  EXPECT_EQ(profile.other.steps, 1);
  EXPECT_EQ(profile.other.tokens, 5 + 3 + 7);
  EXPECT_EQ(profile.decode.steps, 5);
  EXPECT_EQ(profile.decode.tokens, 15);
  for (const StepTimes* times : {&profile.decode, &profile.other}) {
    for (StepPart part : {StepPart::kPlan, StepPart::kEmbed, StepPart::kNorm, StepPart::kQkvGemm,
                          StepPart::kRope, StepPart::kKvWrite, StepPart::kAttention,
                          StepPart::kOGemm, StepPart::kMlpGemm, StepPart::kActivation,
                          StepPart::kResidual, StepPart::kLmHead, StepPart::kSampling}) {
      EXPECT_GT((*times)[part], 0) << StepPartName(part);
    }
    EXPECT_EQ((*times)[StepPart::kAllReduce], 0);  // one rank: no collective
    const int64_t parts = std::accumulate(times->nanos.begin(), times->nanos.end(), int64_t{0});
    EXPECT_LE(parts, times->total_nanos);
    EXPECT_GT(parts, times->total_nanos / 2);  // the parts are most of a step
  }
}

TEST(StepProfileTest, ReportGivesEachPartPerStepAndWhatIsLeftOver) {
  StepTimes times;
  times.steps = 4;
  times.tokens = 4;
  times.total_nanos = 4'000'000;  // 1 ms a step
  times[StepPart::kMlpGemm] = 2'000'000;
  times[StepPart::kAttention] = 1'000'000;
  const std::string report = FormatStepTimes("decode", times);
  EXPECT_THAT(report, StartsWith("decode steps: 4, 1.0 tokens each, 1.000 ms a step\n"));
  EXPECT_THAT(report, HasSubstr("mlp gemms        0.500 ms  50.0%"));
  EXPECT_THAT(report, HasSubstr("attention        0.250 ms  25.0%"));
  EXPECT_THAT(report, HasSubstr("unaccounted      0.250 ms  25.0%"));
  EXPECT_THAT(report, ::testing::Not(HasSubstr("rope")));  // parts never timed are left out
  EXPECT_EQ(FormatStepTimes("decode", StepTimes{}), "");
}

}  // namespace
}  // namespace folio
