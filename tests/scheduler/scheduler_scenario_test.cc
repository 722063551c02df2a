// Scenario tests: the bugs other engines shipped (issue 2, section 4 and
// REFERENCES.md). This file: preemption (starved runs must match ample ones,
// victim choice, recompute vs swap) and the random differential workloads.
// Aborts and admission liveness are in scheduler_liveness_scenario_test.cc,
// budgets and prefix-cache hits in scheduler_budget_scenario_test.cc.
// Every workload runs through the real Scheduler and a SimulatedWorker that
// verifies the KV mapping each step, with bounded step loops (a hang is a
// failure, never a stuck test), and ends drained.

#include <cstdio>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "scheduler/simulated_worker.h"
#include "tests/scheduler/scheduler_test_util.h"

namespace folio {
namespace {

using ::testing::ElementsAre;
using test::ExpectDrained;
using test::MakeRequest;
using test::OutputCollector;
using test::TestConfig;

// A mixed workload: single sequences of varied lengths, some sharing a
// prompt prefix, and (optionally) parallel-sampling requests.
std::vector<RequestSpec> MixedWorkload(bool with_parallel) {
  std::vector<RequestSpec> specs;
  const int32_t prompt_lens[] = {5, 40, 17, 8, 33, 24, 3, 50, 16, 29};
  const int32_t max_tokens[] = {30, 12, 41, 25, 9, 36, 44, 20, 31, 15};
  for (int32_t i = 0; i < 10; ++i) {
    // Requests 4 and 8 share request 1's prompt prefix (base 2).
    const int32_t base = (i == 4 || i == 8) ? 2 : i + 1;
    RequestSpec r = MakeRequest(i, prompt_lens[i], max_tokens[i], base);
    if (with_parallel && (i == 2 || i == 5)) {
      r.sampling.n = 2;
      r.sampling.best_of = 2;
    }
    specs.push_back(std::move(r));
  }
  return specs;
}

struct RunOutcome {
  OutputCollector out;
  SchedulerStats stats;
  int32_t swap_out_ops = 0;
  int32_t swap_in_ops = 0;
  int64_t first_swap_out_step = -1;
  int64_t first_swap_in_step = -1;
};

RunOutcome RunWorkload(const SchedulerConfig& c, const std::vector<RequestSpec>& specs) {
  RunOutcome o;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  for (const RequestSpec& r : specs) EXPECT_TRUE(s->AddRequest(r).ok());
  const absl::Status st =
      test::RunUntilDrained(*s, w, o.out, 20000, [&](const StepPlan& p, const Scheduler&) {
        if (!p.swap_out.empty() && o.first_swap_out_step < 0) o.first_swap_out_step = p.step_id;
        if (!p.swap_in.empty() && o.first_swap_in_step < 0) o.first_swap_in_step = p.step_id;
        o.swap_out_ops += static_cast<int32_t>(p.swap_out.size());
        o.swap_in_ops += static_cast<int32_t>(p.swap_in.size());
      });
  EXPECT_TRUE(st.ok()) << st;
  o.stats = s->stats();
  ExpectDrained(*s);
  return o;
}

void ExpectSameOutputs(const OutputCollector& got, const OutputCollector& want) {
  ASSERT_EQ(got.all().size(), want.all().size());
  for (const auto& [id, w] : want.all()) {
    const test::CollectedRequest& g = got.at(id);
    EXPECT_TRUE(g.finished) << id;
    EXPECT_EQ(g.error, w.error) << id;
    ASSERT_EQ(g.sequences.size(), w.sequences.size()) << id;
    for (const auto& [index, ws] : w.sequences) {
      EXPECT_EQ(g.tokens(index), ws.token_ids) << "request " << id << " sequence " << index;
      EXPECT_EQ(g.reason(index), ws.finish_reason) << "request " << id;
    }
  }
}

// The vLLM e2e check: a block-starved engine, preempting constantly, must
// produce exactly the tokens an ample one does (any wrong KV mapping after
// recompute, swap or copy-on-write would change them).
class StarvedMatchesAmpleTest : public ::testing::TestWithParam<std::tuple<PreemptionMode, bool>> {};

TEST_P(StarvedMatchesAmpleTest, IdenticalTokens) {
  const auto [mode, caching] = GetParam();
  const std::vector<RequestSpec> specs = MixedWorkload(/*with_parallel=*/true);
  SchedulerConfig ample = TestConfig(400);
  ample.enable_prefix_caching = caching;
  const RunOutcome reference = RunWorkload(ample, specs);
  EXPECT_EQ(reference.stats.num_preemptions_recompute + reference.stats.num_preemptions_swap, 0);

  SchedulerConfig starved = TestConfig(16);
  starved.enable_prefix_caching = caching;
  starved.preemption_mode = mode;
  starved.num_host_blocks = 64;
  starved.max_num_batched_tokens = 48;
  const RunOutcome got = RunWorkload(starved, specs);
  ExpectSameOutputs(got.out, reference.out);
  const int64_t preemptions = got.stats.num_preemptions_recompute + got.stats.num_preemptions_swap;
  EXPECT_GT(preemptions, 3);
  switch (mode) {
    case PreemptionMode::kRecompute:
      EXPECT_EQ(got.stats.num_preemptions_swap, 0);
      EXPECT_EQ(got.swap_out_ops, 0);
      break;
    case PreemptionMode::kSwap:
      EXPECT_GT(got.stats.num_preemptions_swap, 0);
      // Swap-outs come first, swap-ins bring the same blocks back.
      EXPECT_GT(got.swap_out_ops, 0);
      EXPECT_EQ(got.swap_in_ops, got.swap_out_ops);
      EXPECT_LT(got.first_swap_out_step, got.first_swap_in_step);
      break;
    case PreemptionMode::kAuto:
      break;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, StarvedMatchesAmpleTest,
                         ::testing::Combine(::testing::Values(PreemptionMode::kRecompute,
                                                             PreemptionMode::kSwap,
                                                             PreemptionMode::kAuto),
                                            ::testing::Bool()));

// The same with a 1,024-token greedy-like generation per request, as vLLM's
// block-manager e2e test does: long outputs accumulate any mapping error.
TEST(SchedulerScenarioTest, LongGenerationsStarvedMatchAmple) {
  std::vector<RequestSpec> specs;
  for (int32_t i = 0; i < 4; ++i) specs.push_back(MakeRequest(i, 10 + 7 * i, 1024 - 30 * i));
  SchedulerConfig ample = TestConfig(600);
  ample.max_model_len = 2048;
  const RunOutcome reference = RunWorkload(ample, specs);
  SchedulerConfig starved = TestConfig(200);
  starved.max_model_len = 2048;
  starved.preemption_mode = PreemptionMode::kRecompute;
  const RunOutcome got = RunWorkload(starved, specs);
  ExpectSameOutputs(got.out, reference.out);
  EXPECT_GT(got.stats.num_preemptions_recompute, 0);
  for (int32_t i = 0; i < 4; ++i) EXPECT_EQ(got.out.at(i).tokens().size(), 1024u - 30 * i);
}

// auto = recompute for single-sequence requests, swap for multi-sequence ones.
TEST(SchedulerScenarioTest, AutoRecomputesSingleAndSwapsMultiSequence) {
  SchedulerConfig c = TestConfig(16);
  c.num_host_blocks = 64;
  const RunOutcome single = RunWorkload(c, MixedWorkload(/*with_parallel=*/false));
  EXPECT_GT(single.stats.num_preemptions_recompute, 0);
  EXPECT_EQ(single.stats.num_preemptions_swap, 0);

  // Two fanned-out n=2 requests outgrow the pool while decoding.
  std::vector<RequestSpec> specs;
  for (RequestId id = 0; id < 2; ++id) {
    RequestSpec r = MakeRequest(id, 12, 40);
    r.sampling.n = 2;
    r.sampling.best_of = 2;
    specs.push_back(r);
  }
  const RunOutcome multi = RunWorkload(c, specs);
  EXPECT_GT(multi.stats.num_preemptions_swap, 0);
  EXPECT_EQ(multi.stats.num_preemptions_recompute, 0);
  SchedulerConfig ample = TestConfig(400);
  ExpectSameOutputs(multi.out, RunWorkload(ample, specs).out);
}

// Swap mode with a full host pool falls back to recompute; the engine keeps
// going and the outputs are unaffected.
TEST(SchedulerScenarioTest, HostPoolFullFallsBackToRecompute) {
  const std::vector<RequestSpec> specs = MixedWorkload(/*with_parallel=*/true);
  SchedulerConfig c = TestConfig(16);
  c.preemption_mode = PreemptionMode::kSwap;
  c.num_host_blocks = 0;
  const RunOutcome none = RunWorkload(c, specs);
  EXPECT_GT(none.stats.num_preemptions_recompute, 0);
  EXPECT_EQ(none.stats.num_preemptions_swap, 0);
  EXPECT_EQ(none.swap_out_ops, 0);
  // A host pool too small for most victims: some swaps, the rest recompute.
  c.num_host_blocks = 3;
  const RunOutcome tiny = RunWorkload(c, specs);
  EXPECT_GT(tiny.stats.num_preemptions_recompute, 0);
  const RunOutcome reference = RunWorkload(TestConfig(400), specs);
  ExpectSameOutputs(none.out, reference.out);
  ExpectSameOutputs(tiny.out, reference.out);
}

// Victim choice: the lowest-priority, latest-arrived running request.
struct VictimCase {
  SchedulingPolicy policy;
  int32_t priorities[3];
  RequestId victim;
};

class VictimTest : public ::testing::TestWithParam<VictimCase> {};

TEST_P(VictimTest, PicksLowestPriorityLatestArrival) {
  const VictimCase& k = GetParam();
  SchedulerConfig c = TestConfig(6);  // three prompts of 15 fill it exactly
  c.policy = k.policy;
  c.preemption_mode = PreemptionMode::kRecompute;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  absl::flat_hash_map<SequenceId, RequestId> owner;
  for (RequestId id = 0; id < 3; ++id) {
    RequestSpec r = MakeRequest(id, 15, 8);
    r.priority = k.priorities[id];
    FOLIO_ASSERT_OK(s->AddRequest(r));
  }
  OutputCollector out;
  std::vector<RequestId> preempted;
  for (int32_t step = 0; step < 3; ++step) {
    StepPlan plan;
    FOLIO_ASSERT_OK(test::Step(*s, w, out, &plan));
    for (const NewSequenceData& n : plan.new_sequences) owner[n.seq_id] = n.request_id;
    for (SequenceId id : plan.preempted_seq_ids) preempted.push_back(owner[id]);
  }
  // Step 3 writes position 16: each request needs a third block, none is free.
  EXPECT_THAT(preempted, ElementsAre(k.victim));
  EXPECT_EQ(s->num_waiting(), 1);
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 200));
  for (RequestId id = 0; id < 3; ++id) EXPECT_EQ(out.at(id).tokens().size(), 8u);
  ExpectDrained(*s);
}

INSTANTIATE_TEST_SUITE_P(
    Policies, VictimTest,
    ::testing::Values(VictimCase{SchedulingPolicy::kFcfs, {0, 0, 0}, 2},
                      VictimCase{SchedulingPolicy::kFcfs, {9, 0, 0}, 2},  // FCFS ignores priority
                      VictimCase{SchedulingPolicy::kPriority, {2, 0, 1}, 0},
                      VictimCase{SchedulingPolicy::kPriority, {1, 1, 0}, 1},
                      VictimCase{SchedulingPolicy::kPriority, {0, 1, 0}, 1}));

// Differential fuzz: random workloads (arrivals over time, shared prefixes,
// n / best_of / beam search, EOS, stop tokens, priorities) run starved in
// every preemption mode and policy must produce exactly the tokens of an
// ample run. Every request fits the starved pool on its own, unshared.
TEST(SchedulerScenarioTest, RandomWorkloadsStarvedMatchAmple) {
  int64_t swaps = 0;
  int64_t recomputes = 0;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    uint64_t x = seed * 0x9e3779b97f4a7c15ULL;
    auto rnd = [&](uint32_t n) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      return static_cast<int32_t>((x >> 33) % n);
    };
    struct Arrival {
      int32_t step;
      RequestSpec spec;
    };
    std::vector<Arrival> arrivals;
    for (RequestId id = 0; id < 30; ++id) {
      RequestSpec r = MakeRequest(id, 1 + rnd(48), 1 + rnd(40), /*base=*/rnd(4));
      r.eos_token_ids = {2};
      r.sampling.ignore_eos = rnd(3) == 0;
      r.sampling.stop_token_ids = {rnd(2) == 0 ? 3 : 7};
      r.priority = rnd(3);
      switch (rnd(6)) {
        case 0:
          r.sampling.n = 2;
          r.sampling.best_of = 3;
          break;
        case 1:
          r.sampling.n = 2;
          r.sampling.best_of = 2;
          break;
        case 2:
          r.sampling.beam_width = 3;
          r.sampling.n = 2;
          r.sampling.best_of = 2;
          break;
        default:
          break;
      }
      arrivals.push_back({rnd(60), std::move(r)});
    }
    auto run = [&](const SchedulerConfig& c, SchedulerStats* stats) {
      auto s = test::MakeScheduler(c);
      SimulatedWorker::Options wo = test::WorkerOptions(c);
      wo.vocab_size = 64;  // stop tokens and EOS come up
      wo.eos_token_id = 2;
      wo.eos_probability = 0.02;
      SimulatedWorker w(wo);
      OutputCollector out;
      for (int32_t step = 0; step < 5000; ++step) {
        for (const Arrival& a : arrivals) {
          if (a.step == step) {
            EXPECT_TRUE(s->AddRequest(a.spec).ok());
          }
        }
        if (step >= 60 && !s->HasUnfinishedRequests()) break;
        const absl::Status st = test::Step(*s, w, out);
        if (!st.ok()) {
          ADD_FAILURE() << "seed " << seed << ": " << st;
          break;
        }
      }
      *stats = s->stats();
      ExpectDrained(*s);
      return out;
    };
    SchedulerStats stats;
    const OutputCollector reference = run(TestConfig(400), &stats);
    ASSERT_EQ(reference.all().size(), 30u);
    for (PreemptionMode mode :
         {PreemptionMode::kAuto, PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
      for (SchedulingPolicy policy : {SchedulingPolicy::kFcfs, SchedulingPolicy::kPriority}) {
        SchedulerConfig c = TestConfig(36);  // 3 unshared sequences of 96 tokens fit
        c.preemption_mode = mode;
        c.policy = policy;
        c.num_host_blocks = 30;
        c.max_num_batched_tokens = 40;
        c.max_num_seqs = 10;
        c.enable_prefix_caching = seed % 2 == 0;
        const OutputCollector got = run(c, &stats);
        swaps += stats.num_preemptions_swap;
        recomputes += stats.num_preemptions_recompute;
        ASSERT_EQ(got.all().size(), 30u);
        for (const auto& [id, want] : reference.all()) {
          const test::CollectedRequest& g = got.at(id);
          ASSERT_EQ(g.sequences.size(), want.sequences.size()) << "seed " << seed << " id " << id;
          for (const auto& [i, seq] : want.sequences) {
            EXPECT_EQ(g.tokens(i), seq.token_ids)
                << "seed " << seed << " " << PreemptionModeName(mode) << " request " << id;
            EXPECT_EQ(g.reason(i), seq.finish_reason) << "seed " << seed << " request " << id;
          }
          EXPECT_EQ(g.error, want.error) << "seed " << seed << " request " << id;
        }
      }
    }
  }
  EXPECT_GT(swaps, 50);
  EXPECT_GT(recomputes, 50);
  std::printf("preemptions: %lld swap, %lld recompute\n", static_cast<long long>(swaps),
              static_cast<long long>(recomputes));
}

// A long random workload: preemption, prefix sharing, fan-out, aborts;
// after it drains, every block is free or cached and all counts are zero.
TEST(SchedulerScenarioTest, RandomWorkloadDrainsClean) {
  for (PreemptionMode mode :
       {PreemptionMode::kAuto, PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
    SchedulerConfig c = TestConfig(24);
    c.preemption_mode = mode;
    c.num_host_blocks = 12;
    c.max_num_batched_tokens = 40;
    c.max_num_seqs = 12;
    c.max_model_len = 160;
    c.policy = mode == PreemptionMode::kSwap ? SchedulingPolicy::kPriority : SchedulingPolicy::kFcfs;
    auto s = test::MakeScheduler(c);
    SimulatedWorker::Options wo = test::WorkerOptions(c);
    wo.eos_token_id = 2;
    wo.eos_probability = 0.02;
    SimulatedWorker w(wo);
    OutputCollector out;
    uint64_t x = 12345;
    auto rnd = [&](uint32_t n) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      return static_cast<int32_t>((x >> 33) % n);
    };
    RequestId next = 0;
    for (int32_t step = 0; step < 600; ++step) {
      if (rnd(3) == 0) {
        RequestSpec r = MakeRequest(next, 1 + rnd(70), 1 + rnd(60), /*base=*/rnd(6));
        r.sampling.ignore_eos = rnd(2) == 0;
        r.eos_token_ids = {2};
        r.priority = rnd(3);
        const int32_t kind = rnd(8);
        if (kind == 0) {
          r.sampling.n = 2;
          r.sampling.best_of = 3;
        } else if (kind == 1) {
          r.sampling.n = 3;
          r.sampling.best_of = 3;
        } else if (kind == 2) {
          r.sampling.beam_width = 2;
          r.sampling.n = 2;
          r.sampling.best_of = 2;
        }
        FOLIO_ASSERT_OK(s->AddRequest(r));
        ++next;
      }
      if (rnd(10) == 0 && next > 0) s->Abort(rnd(static_cast<uint32_t>(next)));
      FOLIO_ASSERT_OK(test::Step(*s, w, out)) ;
    }
    FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 3000));
    EXPECT_EQ(out.all().size(), static_cast<size_t>(next));
    for (const auto& [id, r] : out.all()) EXPECT_TRUE(r.finished) << id;
    ExpectDrained(*s);
  }
}

}  // namespace
}  // namespace folio
