// Scenario tests (see scheduler_scenario_test.cc): the per-step token
// budget with chunked prefill, prefix-cache hits against the budget and
// running requests, and max_num_seqs with admission that is never stuck.
// Every workload runs through the real Scheduler and a SimulatedWorker that
// verifies the KV mapping each step, with bounded step loops (a hang is a
// failure, never a stuck test), and ends drained.

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "scheduler/simulated_worker.h"
#include "tests/scheduler/scheduler_test_util.h"

namespace folio {
namespace {

using test::ExpectDrained;
using test::MakeRequest;
using test::OutputCollector;
using test::TestConfig;

// Chunked prefill: every step's scheduled tokens, decodes included, stay
// within max_num_batched_tokens, and long prompts complete over many steps.
TEST(SchedulerScenarioTest, ChunkedPrefillRespectsTheBudget) {
  SchedulerConfig c = TestConfig(200);
  c.max_num_batched_tokens = 32;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  // Decoding requests first, then long prompts arriving behind them.
  for (RequestId id = 0; id < 6; ++id) FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(id, 4, 40)));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(10, 150, 5)));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(11, 97, 5)));
  absl::flat_hash_map<SequenceId, RequestId> owner;
  absl::flat_hash_map<RequestId, int32_t> prefill_steps;
  absl::flat_hash_map<RequestId, int32_t> next_pos;
  int32_t full_steps = 0;
  auto out = test::RunToCompletion(*s, w, 500, [&](const StepPlan& p, const Scheduler&) {
    EXPECT_LE(p.num_scheduled_tokens, 32);
    if (p.num_scheduled_tokens == 32) ++full_steps;
    for (const NewSequenceData& n : p.new_sequences) owner[n.seq_id] = n.request_id;
    for (const ScheduledSequence& work : p.scheduled) {
      const RequestId id = owner[work.seq_id];
      EXPECT_EQ(work.start_position, next_pos[id]) << id;  // chunks are contiguous
      next_pos[id] = work.start_position + static_cast<int32_t>(work.token_ids.size());
      if (id >= 10 && work.start_position < (id == 10 ? 150 : 97)) {
        ++prefill_steps[id];
        const bool last = next_pos[id] == (id == 10 ? 150 : 97);
        EXPECT_EQ(work.sample_mode, last ? SampleMode::kSample : SampleMode::kNone);
      }
    }
  });
  FOLIO_ASSERT_OK(out.status());
  EXPECT_GE(prefill_steps[10], 5);  // 150 tokens through a 32-token budget
  EXPECT_GE(prefill_steps[11], 4);
  EXPECT_GT(full_steps, 5);  // prefill chunks fill what decodes leave
  EXPECT_EQ(out->at(10).tokens().size(), 5u);
  EXPECT_EQ(out->at(11).tokens().size(), 5u);
  for (RequestId id = 0; id < 6; ++id) EXPECT_EQ(out->at(id).tokens().size(), 40u);
  ExpectDrained(*s);
}

// A prefix-cache hit does not consume the budget: a second request with the
// same long prompt computes only the uncached tail (at least one token).
TEST(SchedulerScenarioTest, PrefixCacheHitDoesNotConsumeBudget) {
  SchedulerConfig c = TestConfig(64);
  c.max_num_batched_tokens = 16;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, 64, 3, /*base=*/5)));
  auto first = test::RunToCompletion(*s, w, 50);
  FOLIO_ASSERT_OK(first.status());
  EXPECT_EQ(first->at(1).num_cached_prompt_tokens, 0);
  EXPECT_GT(s->stats().num_steps, 4);  // 64 tokens through a 16-token budget

  struct Case {
    RequestId id;
    int32_t prompt_len;
    int32_t cached;
  };
  // 64 = 8 full blocks, but the last token is always computed: 7 hit.
  // 57 = 7 full blocks + 1: 7 hit, one token computed. 60: 7 hit, 4 computed.
  for (const Case& k : {Case{2, 64, 56}, Case{3, 57, 56}, Case{4, 60, 56}}) {
    FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(k.id, k.prompt_len, 3, /*base=*/5)));
    OutputCollector out;
    StepPlan plan;
    FOLIO_ASSERT_OK(test::Step(*s, w, out, &plan));
    ASSERT_EQ(plan.new_sequences.size(), 1u);
    EXPECT_EQ(plan.new_sequences[0].num_computed_tokens, k.cached);
    ASSERT_EQ(plan.scheduled.size(), 1u);
    EXPECT_EQ(plan.scheduled[0].start_position, k.cached);
    EXPECT_EQ(plan.num_scheduled_tokens, k.prompt_len - k.cached);
    EXPECT_EQ(plan.scheduled[0].sample_mode, SampleMode::kSample);  // whole prompt done in one step
    ASSERT_TRUE(out.contains(k.id));
    EXPECT_EQ(out.at(k.id).num_cached_prompt_tokens, k.cached);
    EXPECT_EQ(out.at(k.id).tokens().size(), 1u);
    FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 20));
    EXPECT_EQ(out.at(k.id).num_cached_prompt_tokens, k.cached);
    if (k.prompt_len == 64) {
      EXPECT_EQ(out.at(k.id).tokens(), first->at(1).tokens());
    }
    ExpectDrained(*s);
  }
  const KvCacheManager::PrefixCacheStats& ps = s->kv_cache().prefix_cache_stats();
  EXPECT_EQ(ps.hits, 3 * 56);
  // A different salt shares nothing.
  RequestSpec salted = MakeRequest(5, 64, 2, /*base=*/5);
  salted.cache_salt = "tenant-b";
  FOLIO_ASSERT_OK(s->AddRequest(salted));
  auto out = test::RunToCompletion(*s, w, 50);
  FOLIO_ASSERT_OK(out.status());
  EXPECT_EQ(out->at(5).num_cached_prompt_tokens, 0);
  ExpectDrained(*s);
}

// Hits on blocks a running request still holds: the blocks are shared by
// reference, not copied, and both produce their own tokens.
TEST(SchedulerScenarioTest, PrefixHitOnRunningRequestSharesBlocks) {
  SchedulerConfig c = TestConfig(64);
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, 40, 10, /*base=*/3)));
  OutputCollector out;
  FOLIO_ASSERT_OK(test::Step(*s, w, out));
  const int32_t used = s->kv_cache().device_pool().num_used_blocks();
  EXPECT_EQ(used, 5);
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(2, 44, 10, /*base=*/3)));
  StepPlan plan;
  FOLIO_ASSERT_OK(test::Step(*s, w, out, &plan));
  ASSERT_EQ(plan.new_sequences.size(), 1u);
  EXPECT_EQ(plan.new_sequences[0].num_computed_tokens, 40);
  // Request 1 grew one block (position 40); request 2 added one (40..43).
  EXPECT_EQ(s->kv_cache().device_pool().num_used_blocks(), 7);
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 50));
  EXPECT_EQ(out.at(2).num_cached_prompt_tokens, 40);
  ExpectDrained(*s);
}

// max_num_seqs bounds the running sequences, and admission is never stuck
// while the cache is free (vLLM #53130): a slot that frees is filled at once.
TEST(SchedulerScenarioTest, MaxNumSeqsBoundsRunningAndAdmissionIsNotStuck) {
  SchedulerConfig c = TestConfig(200);
  c.max_num_seqs = 4;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  for (RequestId id = 0; id < 12; ++id) {
    RequestSpec r = MakeRequest(id, 6 + id, 3 + (id * 5) % 11);
    if (id % 4 == 1) {
      r.sampling.n = 2;
      r.sampling.best_of = 2;
    }
    FOLIO_ASSERT_OK(s->AddRequest(r));
  }
  int32_t steps = 0;
  auto out = test::RunToCompletion(*s, w, 200, [&](const StepPlan& p, const Scheduler& sc) {
    ++steps;
    EXPECT_LE(static_cast<int32_t>(p.scheduled.size()), 4);
    EXPECT_LE(sc.num_running_sequences(), 4);
  });
  FOLIO_ASSERT_OK(out.status());
  ExpectDrained(*s);

  // Single-sequence requests: whenever some wait, all four slots are busy.
  for (RequestId id = 20; id < 32; ++id) FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(id, 5, 2 + id % 7)));
  OutputCollector more;
  for (int32_t step = 0; s->HasUnfinishedRequests(); ++step) {
    ASSERT_LT(step, 200);
    StepPlan plan;
    const int32_t waiting_before = s->num_waiting();
    FOLIO_ASSERT_OK(test::Step(*s, w, more, &plan));
    if (waiting_before > 0) {
      EXPECT_EQ(static_cast<int32_t>(plan.scheduled.size()), 4) << "step " << step;
    }
  }
  ExpectDrained(*s);
}

}  // namespace
}  // namespace folio
