// Unit behaviour of Scheduler: request validation, the shape of each step's
// plan (new sequences in full, diffs, copy-on-write, finished and preempted
// ids), chunked prefill, admission order, reservation policies, statistics.

#include "scheduler/scheduler.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/reservation_space.h"
#include "scheduler/simulated_worker.h"
#include "tests/scheduler/scheduler_test_util.h"

namespace folio {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using test::ExpectDrained;
using test::MakePrompt;
using test::MakeRequest;
using test::OutputCollector;
using test::TestConfig;

TEST(SchedulerTest, CreateRejectsBadConfig) {
  SchedulerConfig c = TestConfig(16);
  c.block_size = 12;
  EXPECT_EQ(Scheduler::Create(c).status().code(), absl::StatusCode::kInvalidArgument);
  c = TestConfig(0);
  EXPECT_THAT(std::string(Scheduler::Create(c).status().message()), HasSubstr("num_device_blocks"));
  c = TestConfig(16);
  c.max_model_len = 1;
  EXPECT_THAT(std::string(Scheduler::Create(c).status().message()), HasSubstr("max_model_len"));
}

struct BadRequestCase {
  const char* name;
  void (*mutate)(RequestSpec&);
  const char* field;
};

TEST(SchedulerTest, AddRequestRejectsBadInputNamingTheField) {
  SchedulerConfig c = TestConfig(64);
  c.max_parallel_sequences = 8;
  auto s = test::MakeScheduler(c);
  const BadRequestCase cases[] = {
      {"empty prompt", [](RequestSpec& r) { r.prompt.clear(); }, "prompt"},
      {"max_tokens 0", [](RequestSpec& r) { r.sampling.max_tokens = 0; }, "max_tokens"},
      {"top_p 0", [](RequestSpec& r) { r.sampling.top_p = 0.0f; }, "top_p"},
      {"top_p above 1", [](RequestSpec& r) { r.sampling.top_p = 1.5f; }, "top_p"},
      {"negative temperature", [](RequestSpec& r) { r.sampling.temperature = -1.0f; }, "temperature"},
      {"best_of < n",
       [](RequestSpec& r) {
         r.sampling.n = 3;
         r.sampling.best_of = 2;
       },
       "best_of"},
      {"n 0", [](RequestSpec& r) { r.sampling.n = 0; }, "n must"},
      {"best_of over the cap", [](RequestSpec& r) { r.sampling.best_of = 9; }, "best_of must be"},
      {"n over the cap",
       [](RequestSpec& r) {
         r.sampling.n = 9;
         r.sampling.best_of = 9;
       },
       "n must be at most"},
      {"beam_width over the cap", [](RequestSpec& r) { r.sampling.beam_width = 9; }, "beam_width"},
      {"negative prompt token", [](RequestSpec& r) { r.prompt[3] = -5; }, "token"},
      {"negative stop token", [](RequestSpec& r) { r.sampling.stop_token_ids = {4, -1}; },
       "stop_token_ids[1] must be non-negative"},
      {"top_k -2", [](RequestSpec& r) { r.sampling.top_k = -2; }, "or 0 or -1 to disable it"},
  };
  for (const BadRequestCase& bad : cases) {
    RequestSpec spec = MakeRequest(1, 10, 4);
    bad.mutate(spec);
    const absl::Status st = s->AddRequest(std::move(spec));
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad.name << ": " << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr(bad.field)) << bad.name;
  }
  // Nothing rejected was queued; the id is still free.
  EXPECT_FALSE(s->HasUnfinishedRequests());
  EXPECT_EQ(s->num_waiting(), 0);
  FOLIO_EXPECT_OK(s->AddRequest(MakeRequest(1, 10, 4)));
  EXPECT_EQ(s->num_waiting(), 1);
  SimulatedWorker w(test::WorkerOptions(c));
  auto out = test::RunToCompletion(*s, w, 20);
  FOLIO_ASSERT_OK(out.status());
  EXPECT_EQ(out->at(1).tokens().size(), 4u);
  ExpectDrained(*s);
}

TEST(SchedulerTest, DuplicateIdIsAlreadyExistsAndTheOriginalStillRuns) {
  SchedulerConfig c = TestConfig(64);
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(42, 10, 3)));
  const absl::Status dup = s->AddRequest(MakeRequest(42, 20, 5));
  EXPECT_EQ(dup.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(dup.message()), HasSubstr("42"));
  EXPECT_EQ(s->num_waiting(), 1);
  auto out = test::RunToCompletion(*s, w, 100);
  FOLIO_ASSERT_OK(out.status());
  EXPECT_EQ(out->at(42).num_prompt_tokens, 10);
  EXPECT_EQ(out->at(42).tokens().size(), 3u);
  ExpectDrained(*s);
  // A finished request's id may be used again.
  FOLIO_EXPECT_OK(s->AddRequest(MakeRequest(42, 5, 1)));
  FOLIO_ASSERT_OK(test::RunToCompletion(*s, w, 100).status());
  ExpectDrained(*s);
}

// --max-model-len cannot reach past the model's context (its rotary table
// ends there) nor past the cache; 0 takes the smaller of the two.
TEST(SchedulerTest, MaxModelLenStaysWithinTheModelAndTheCache) {
  EXPECT_EQ(*ResolveMaxModelLen(0, 256, 1000), 256);
  EXPECT_EQ(*ResolveMaxModelLen(256, 256, 1000), 256);
  absl::StatusOr<int32_t> longer = ResolveMaxModelLen(257, 256, 1000);
  ASSERT_FALSE(longer.ok());
  EXPECT_EQ(longer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(longer.status().message().find("exceeds the model's context of 256"),
            std::string::npos)
      << longer.status();
  EXPECT_FALSE(ResolveMaxModelLen(1001, 4096, 1000).ok());
  EXPECT_EQ(*ResolveMaxModelLen(0, 4096, 1000), 1000);
}

// max_model_len as the servers resolve it (RequestTokenSlots: the blocks
// above the watermark): the longest prompt it allows is admitted, not refused
// as never fitting, and runs to max_model_len. One more token is refused.
TEST(SchedulerTest, TheLongestRequestMaxModelLenAllowsFitsAboveTheWatermark) {
  SchedulerConfig c = TestConfig(200, 16);  // 2 watermark blocks at 1%
  c.watermark = 0.01;
  c.max_num_batched_tokens = 4096;
  EXPECT_EQ(WatermarkBlocks(c.watermark, c.num_device_blocks), 2);
  EXPECT_EQ(RequestTokenSlots(c), 198 * 16);
  absl::StatusOr<int32_t> len = ResolveMaxModelLen(0, 1 << 20, RequestTokenSlots(c));
  FOLIO_ASSERT_OK(len.status());
  c.max_model_len = *len;
  EXPECT_FALSE(ResolveMaxModelLen(*len + 1, 1 << 20, RequestTokenSlots(c)).ok());
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, c.max_model_len - 1, 5)));
  auto out = test::RunToCompletion(*s, w, 100);
  FOLIO_ASSERT_OK(out.status());
  EXPECT_EQ(out->at(1).error, "");
  EXPECT_EQ(out->at(1).tokens().size(), 1u);  // reached max_model_len
  ExpectDrained(*s);
}

// Without a known output length (a served request), pow2 and oracle take
// max_tokens: prompt 10 + max_tokens 14 = 24 tokens, so pow2 reserves 32
// slots (4 blocks of 8) and oracle 24 (3); max needs no estimate (1024).
TEST(SchedulerTest, ReservationWithoutAnExpectedOutputLenTakesMaxTokens) {
  struct Case {
    ReservationPolicy policy;
    int32_t reserved;
  };
  for (const Case& k : {Case{ReservationPolicy::kPow2, 32}, Case{ReservationPolicy::kOracle, 24},
                        Case{ReservationPolicy::kMax, 1024}}) {
    SchedulerConfig c = TestConfig(200);
    c.reservation = k.policy;
    auto s = test::MakeScheduler(c);
    SimulatedWorker w(test::WorkerOptions(c));
    FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, 10, 14)));
    OutputCollector out;
    FOLIO_ASSERT_OK(test::Step(*s, w, out));
    const Request* r = s->FindRequest(1);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->reserved_tokens, k.reserved) << ReservationPolicyName(k.policy);
    FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 50));
    EXPECT_EQ(out.at(1).tokens().size(), 14u);
    ExpectDrained(*s);
  }
  // A huge max_tokens reserves max_model_len, not an overflowed length.
  SchedulerConfig c = TestConfig(200);
  c.reservation = ReservationPolicy::kPow2;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, 10, INT32_MAX)));
  OutputCollector out;
  FOLIO_ASSERT_OK(test::Step(*s, w, out));
  EXPECT_EQ(s->FindRequest(1)->reserved_tokens, 1024);
  ASSERT_TRUE(s->Abort(1));
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 10));
  ExpectDrained(*s);
}

// The first plan carries the sequence in full; later ones only what changed:
// nothing while the table is unchanged, the appended block (offset = old
// size) when one is added.
TEST(SchedulerTest, NewSequenceInFullThenAppendedBlockDiffs) {
  SchedulerConfig c = TestConfig(32);
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  RequestSpec spec = MakeRequest(7, 20, 12);
  const std::vector<TokenId> prompt = spec.prompt;
  FOLIO_ASSERT_OK(s->AddRequest(spec));
  OutputCollector out;

  StepPlan plan;
  StepResult result;
  FOLIO_ASSERT_OK(test::Step(*s, w, out, &plan, &result));
  ASSERT_EQ(plan.new_sequences.size(), 1u);
  const NewSequenceData& n = plan.new_sequences[0];
  const SequenceId id = n.seq_id;
  EXPECT_EQ(n.request_id, 7);
  EXPECT_EQ(n.prompt_token_ids, prompt);
  EXPECT_TRUE(n.output_token_ids.empty());
  EXPECT_EQ(n.block_ids.size(), 3u);  // 20 tokens in blocks of 8
  EXPECT_EQ(n.num_computed_tokens, 0);
  EXPECT_EQ(n.sampling.max_tokens, 12);
  EXPECT_TRUE(plan.cached_sequences.empty());
  ASSERT_EQ(plan.scheduled.size(), 1u);
  EXPECT_EQ(plan.scheduled[0].seq_id, id);
  EXPECT_EQ(plan.scheduled[0].start_position, 0);
  EXPECT_THAT(plan.scheduled[0].token_ids, ::testing::ElementsAreArray(prompt));
  EXPECT_EQ(plan.scheduled[0].sample_mode, SampleMode::kSample);
  EXPECT_EQ(plan.scheduled[0].num_samples, 1);
  EXPECT_EQ(plan.num_scheduled_tokens, 20);
  EXPECT_TRUE(plan.copies.empty() && plan.swap_in.empty() && plan.swap_out.empty());
  ASSERT_EQ(result.samples.size(), 1u);
  std::vector<BlockId> table = n.block_ids;

  for (int32_t k = 1; k < 12; ++k) {
    const TokenId last = out.at(7).tokens().back();
    FOLIO_ASSERT_OK(test::Step(*s, w, out, &plan, &result));
    const int32_t pos = 20 + k - 1;
    EXPECT_TRUE(plan.new_sequences.empty()) << k;
    ASSERT_EQ(plan.scheduled.size(), 1u);
    EXPECT_EQ(plan.scheduled[0].start_position, pos);
    EXPECT_THAT(plan.scheduled[0].token_ids, ElementsAre(last));
    if (pos % 8 == 0) {
      // The token starts a new block: one appended id at the old size.
      ASSERT_EQ(plan.cached_sequences.size(), 1u) << "pos " << pos;
      const CachedSequenceData& d = plan.cached_sequences[0];
      EXPECT_EQ(d.seq_id, id);
      EXPECT_EQ(d.block_table_offset, static_cast<int32_t>(table.size()));
      ASSERT_EQ(d.block_ids.size(), 1u);
      EXPECT_EQ(d.num_computed_tokens, pos);
      table.push_back(d.block_ids[0]);
    } else {
      EXPECT_TRUE(plan.cached_sequences.empty()) << "pos " << pos;
    }
    EXPECT_EQ(*w.MirrorBlockTable(id), table);
  }
  EXPECT_TRUE(out.at(7).finished);
  EXPECT_EQ(out.at(7).reason(), FinishReason::kLength);
  EXPECT_EQ(out.at(7).tokens().size(), 12u);
  ExpectDrained(*s);
}

// The finished sequence's id reaches the workers once, in the next plan.
TEST(SchedulerTest, FinishedIdsAppearOnceInTheNextPlan) {
  SchedulerConfig c = TestConfig(32);
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, 5, 2)));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(2, 5, 6)));
  OutputCollector out;
  StepPlan plan;
  FOLIO_ASSERT_OK(test::Step(*s, w, out, &plan));
  ASSERT_EQ(plan.new_sequences.size(), 2u);
  const SequenceId first = plan.new_sequences[0].seq_id;
  EXPECT_EQ(plan.new_sequences[0].request_id, 1);
  FOLIO_ASSERT_OK(test::Step(*s, w, out, &plan));
  EXPECT_TRUE(plan.finished_seq_ids.empty());
  EXPECT_TRUE(out.at(1).finished);
  FOLIO_ASSERT_OK(test::Step(*s, w, out, &plan));
  EXPECT_THAT(plan.finished_seq_ids, ElementsAre(first));
  EXPECT_EQ(w.MirrorBlockTable(first), nullptr);
  for (int i = 0; i < 3; ++i) {
    FOLIO_ASSERT_OK(test::Step(*s, w, out, &plan));
    EXPECT_TRUE(plan.finished_seq_ids.empty());
  }
  ASSERT_FALSE(s->HasUnfinishedRequests());
  // The last request's id still reaches the workers with the next plan.
  plan = s->Schedule();
  EXPECT_EQ(plan.finished_seq_ids.size(), 1u);
  EXPECT_TRUE(plan.scheduled.empty());
  ASSERT_TRUE(s->Update(StepResult{plan.step_id, {}, {}}).ok());
  plan = s->Schedule();
  EXPECT_TRUE(plan.empty());
  ASSERT_TRUE(s->Update(StepResult{plan.step_id, {}, {}}).ok());
  ExpectDrained(*s);
}

// Fork shares the prompt's blocks; the first write into the shared, partly
// filled last block copies it: a copy op, and a diff starting one earlier.
TEST(SchedulerTest, CopyOnWriteAfterForkYieldsCopyAndDiffOneEarlier) {
  SchedulerConfig c = TestConfig(32);
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  RequestSpec spec = MakeRequest(1, 10, 4);
  spec.sampling.n = 2;
  spec.sampling.best_of = 2;
  FOLIO_ASSERT_OK(s->AddRequest(spec));
  OutputCollector out;
  StepPlan plan;
  StepResult result;
  FOLIO_ASSERT_OK(test::Step(*s, w, out, &plan, &result));
  ASSERT_EQ(plan.new_sequences.size(), 1u);
  const SequenceId parent = plan.new_sequences[0].seq_id;
  const std::vector<BlockId> prompt_blocks = plan.new_sequences[0].block_ids;
  ASSERT_EQ(prompt_blocks.size(), 2u);
  EXPECT_EQ(plan.scheduled[0].num_samples, 2);  // one fan-out of best_of samples
  ASSERT_EQ(result.samples.size(), 1u);
  ASSERT_EQ(result.samples[0].tokens.size(), 2u);
  const TokenId parent_tok = result.samples[0].tokens[0].token_id;
  const TokenId child_tok = result.samples[0].tokens[1].token_id;
  EXPECT_EQ(s->kv_cache().device_pool().ref_count(prompt_blocks[0]), 2);
  EXPECT_EQ(s->kv_cache().device_pool().ref_count(prompt_blocks[1]), 2);

  FOLIO_ASSERT_OK(test::Step(*s, w, out, &plan, &result));
  ASSERT_EQ(plan.copies.size(), 1u);
  EXPECT_EQ(plan.copies[0].src, prompt_blocks[1]);
  const BlockId own = plan.copies[0].dst;
  ASSERT_EQ(plan.cached_sequences.size(), 1u);
  const CachedSequenceData& d = plan.cached_sequences[0];
  EXPECT_EQ(d.seq_id, parent);
  EXPECT_EQ(d.block_table_offset, 1);  // old size 2, minus one: the last block replaced
  EXPECT_THAT(d.block_ids, ElementsAre(own));
  EXPECT_EQ(d.num_computed_tokens, 10);
  ASSERT_EQ(plan.new_sequences.size(), 1u);
  const NewSequenceData& child = plan.new_sequences[0];
  EXPECT_NE(child.seq_id, parent);
  EXPECT_EQ(child.block_ids, prompt_blocks);  // the child writes the original in place
  EXPECT_EQ(child.num_computed_tokens, 10);
  EXPECT_THAT(child.output_token_ids, ElementsAre(child_tok));
  ASSERT_EQ(plan.scheduled.size(), 2u);
  for (const ScheduledSequence& work : plan.scheduled) {
    EXPECT_EQ(work.start_position, 10);
    EXPECT_EQ(work.num_samples, 1);
    EXPECT_THAT(work.token_ids,
                ElementsAre(work.seq_id == parent ? parent_tok : child_tok));
  }
  EXPECT_EQ(s->kv_cache().device_pool().ref_count(prompt_blocks[0]), 2);
  EXPECT_EQ(s->kv_cache().device_pool().ref_count(prompt_blocks[1]), 1);
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 50));
  EXPECT_EQ(out.at(1).sequences.size(), 2u);
  EXPECT_EQ(out.at(1).tokens(0).front(), parent_tok);
  EXPECT_EQ(out.at(1).tokens(1).front(), child_tok);
  ExpectDrained(*s);
}

// A prompt longer than the budget is prefilled in chunks across steps; only
// the last chunk samples.
TEST(SchedulerTest, LongPromptIsChunkedAndSamplesOnlyOnTheLastChunk) {
  SchedulerConfig c = TestConfig(32);
  c.max_num_batched_tokens = 16;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  RequestSpec spec = MakeRequest(1, 50, 3);
  const std::vector<TokenId> prompt = spec.prompt;
  FOLIO_ASSERT_OK(s->AddRequest(spec));
  OutputCollector out;
  const int32_t chunks[] = {16, 16, 16, 2};
  int32_t pos = 0;
  for (int32_t i = 0; i < 4; ++i) {
    StepPlan plan;
    StepResult result;
    FOLIO_ASSERT_OK(test::Step(*s, w, out, &plan, &result));
    ASSERT_EQ(plan.scheduled.size(), 1u);
    const ScheduledSequence& work = plan.scheduled[0];
    EXPECT_EQ(work.start_position, pos);
    ASSERT_EQ(static_cast<int32_t>(work.token_ids.size()), chunks[i]);
    EXPECT_TRUE(std::equal(work.token_ids.begin(), work.token_ids.end(), prompt.begin() + pos));
    EXPECT_EQ(plan.new_sequences.size(), i == 0 ? 1u : 0u);
    if (i < 3) {
      EXPECT_EQ(work.sample_mode, SampleMode::kNone);
      EXPECT_TRUE(result.samples.empty());
      EXPECT_FALSE(out.contains(1));
    } else {
      EXPECT_EQ(work.sample_mode, SampleMode::kSample);
      EXPECT_EQ(out.at(1).tokens().size(), 1u);
    }
    pos += chunks[i];
  }
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 20));
  EXPECT_EQ(out.at(1).tokens().size(), 3u);
  ExpectDrained(*s);
}

// A preempted sequence's id goes out once, in the plan of the preemption;
// on resume it comes back in full, prompt and generated tokens.
TEST(SchedulerTest, PreemptedIdsOnceAndResumedInFull) {
  SchedulerConfig c = TestConfig(4);  // 4 blocks of 8
  c.preemption_mode = PreemptionMode::kRecompute;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  RequestSpec a = MakeRequest(1, 15, 10);
  RequestSpec b = MakeRequest(2, 15, 10);
  const std::vector<TokenId> b_prompt = b.prompt;
  FOLIO_ASSERT_OK(s->AddRequest(a));
  FOLIO_ASSERT_OK(s->AddRequest(b));
  OutputCollector out;
  SequenceId b_seq = -1;
  int32_t preempted_plans = 0;
  bool resumed = false;
  for (int32_t step = 0; s->HasUnfinishedRequests(); ++step) {
    ASSERT_LT(step, 100);
    const std::vector<TokenId> b_before = out.contains(2) ? out.at(2).tokens() : std::vector<TokenId>{};
    StepPlan plan;
    FOLIO_ASSERT_OK(test::Step(*s, w, out, &plan));
    if (step == 0) {
      ASSERT_EQ(plan.new_sequences.size(), 2u);
      b_seq = plan.new_sequences[1].seq_id;
    }
    if (!plan.preempted_seq_ids.empty()) {
      EXPECT_THAT(plan.preempted_seq_ids, ElementsAre(b_seq));
      ++preempted_plans;
    }
    for (const NewSequenceData& n : plan.new_sequences) {
      if (step == 0 || n.seq_id != b_seq) continue;
      resumed = true;
      EXPECT_EQ(preempted_plans, 1);
      EXPECT_EQ(n.prompt_token_ids, b_prompt);
      EXPECT_EQ(n.output_token_ids, b_before);
      EXPECT_FALSE(b_before.empty());
      EXPECT_LT(n.num_computed_tokens, 15 + static_cast<int32_t>(b_before.size()));
      EXPECT_EQ(n.num_computed_tokens % 8, 0);
    }
  }
  EXPECT_EQ(preempted_plans, 1);
  EXPECT_TRUE(resumed);
  EXPECT_EQ(s->stats().num_preemptions_recompute, 1);
  EXPECT_EQ(out.at(1).tokens().size(), 10u);
  EXPECT_EQ(out.at(2).tokens().size(), 10u);
  ExpectDrained(*s);
}

// Recompute requeues the victim at the front: ahead of requests that
// arrived after it, which were waiting already.
TEST(SchedulerTest, RecomputeVictimResumesBeforeLaterArrivals) {
  SchedulerConfig c = TestConfig(4);
  c.max_num_seqs = 2;
  c.preemption_mode = PreemptionMode::kRecompute;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, 15, 12)));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(2, 15, 12)));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(3, 15, 3)));  // waits for a slot
  std::vector<RequestId> admitted;
  std::vector<RequestId> preempted;
  absl::flat_hash_map<SequenceId, RequestId> owner;
  auto out = test::RunToCompletion(*s, w, 100, [&](const StepPlan& p, const Scheduler&) {
    for (const NewSequenceData& n : p.new_sequences) {
      owner[n.seq_id] = n.request_id;
      admitted.push_back(n.request_id);
    }
    for (SequenceId id : p.preempted_seq_ids) preempted.push_back(owner[id]);
  });
  FOLIO_ASSERT_OK(out.status());
  EXPECT_THAT(preempted, ElementsAre(2));
  EXPECT_THAT(admitted, ElementsAre(1, 2, 2, 3));
  for (RequestId id : {1, 2}) EXPECT_EQ(out->at(id).tokens().size(), 12u);
  EXPECT_EQ(out->at(3).tokens().size(), 3u);
  ExpectDrained(*s);
}

// A request admitted in the same step as another with the same prompt
// reuses the blocks that step fills (registered when allocated, written
// earlier in the same plan), computing only its last token.
TEST(SchedulerTest, SamePromptInOneStepSharesTheBlocksBeingFilled) {
  SchedulerConfig c = TestConfig(32);
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, 32, 4, /*base=*/9)));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(2, 32, 4, /*base=*/9)));
  OutputCollector out;
  StepPlan plan;
  FOLIO_ASSERT_OK(test::Step(*s, w, out, &plan));
  ASSERT_EQ(plan.new_sequences.size(), 2u);
  EXPECT_EQ(plan.new_sequences[1].num_computed_tokens, 24);
  EXPECT_EQ(plan.num_scheduled_tokens, 32 + 8);
  EXPECT_EQ(s->kv_cache().device_pool().num_used_blocks(), 5);  // 4 + its own last block
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 20));
  EXPECT_EQ(out.at(1).tokens(), out.at(2).tokens());
  EXPECT_EQ(out.at(2).num_cached_prompt_tokens, 24);
  ExpectDrained(*s);
}

TEST(SchedulerTest, StatsCountPromptAndGenerationTokens) {
  SchedulerConfig c = TestConfig(64);
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, 10, 4)));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(2, 30, 7)));
  RequestSpec n2 = MakeRequest(3, 12, 5);
  n2.sampling.n = 2;
  n2.sampling.best_of = 2;
  FOLIO_ASSERT_OK(s->AddRequest(n2));
  auto out = test::RunToCompletion(*s, w, 100);
  FOLIO_ASSERT_OK(out.status());
  EXPECT_EQ(s->stats().num_prompt_tokens, 52);
  EXPECT_EQ(s->stats().num_generation_tokens, 4 + 7 + 2 * 5);
  EXPECT_EQ(s->stats().num_steps, 7);
  EXPECT_EQ(out->at(3).num_output_tokens, 10);
  ExpectDrained(*s);
}

TEST(SchedulerTest, AbortUnknownOrFinishedIsFalse) {
  SchedulerConfig c = TestConfig(16);
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  EXPECT_FALSE(s->Abort(5));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(5, 4, 2)));
  EXPECT_TRUE(s->Abort(5));
  EXPECT_FALSE(s->Abort(5));
  auto out = test::RunToCompletion(*s, w, 10);
  FOLIO_ASSERT_OK(out.status());
  EXPECT_TRUE(out->at(5).finished);
  EXPECT_EQ(out->at(5).reason(), FinishReason::kAbort);
  ExpectDrained(*s);
}

// Under the priority policy the most important waiting request is admitted
// first (lower value first, then arrival order).
TEST(SchedulerTest, PriorityPolicyAdmitsMostImportantFirst) {
  SchedulerConfig c = TestConfig(64);
  c.policy = SchedulingPolicy::kPriority;
  c.max_num_seqs = 1;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  const int32_t prio[] = {5, 1, 3, 1};
  for (int32_t i = 0; i < 4; ++i) {
    RequestSpec r = MakeRequest(i, 6, 2);
    r.priority = prio[i];
    FOLIO_ASSERT_OK(s->AddRequest(r));
  }
  std::vector<RequestId> admitted;
  auto out = test::RunToCompletion(*s, w, 100, [&](const StepPlan& p, const Scheduler&) {
    for (const NewSequenceData& n : p.new_sequences) admitted.push_back(n.request_id);
  });
  FOLIO_ASSERT_OK(out.status());
  EXPECT_THAT(admitted, ElementsAre(1, 3, 2, 0));
  ExpectDrained(*s);
}

TEST(SchedulerTest, FcfsAdmitsInArrivalOrder) {
  SchedulerConfig c = TestConfig(64);
  c.max_num_seqs = 1;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  for (int32_t i = 0; i < 4; ++i) {
    RequestSpec r = MakeRequest(10 - i, 6, 2);
    r.priority = i;  // ignored under FCFS
    FOLIO_ASSERT_OK(s->AddRequest(r));
  }
  std::vector<RequestId> admitted;
  auto out = test::RunToCompletion(*s, w, 100, [&](const StepPlan& p, const Scheduler&) {
    for (const NewSequenceData& n : p.new_sequences) admitted.push_back(n.request_id);
  });
  FOLIO_ASSERT_OK(out.status());
  EXPECT_THAT(admitted, ElementsAre(10, 9, 8, 7));
  ExpectDrained(*s);
}

// --- Reservation policies -------------------------------------------------

int32_t DeviceUsed(const Scheduler& s) { return s.kv_cache().device_pool().num_used_blocks(); }

TEST(SchedulerReservationTest, MaxReservesMaxModelLenAtAdmission) {
  SchedulerConfig c = TestConfig(20);
  c.max_model_len = 64;  // 8 blocks of 8
  c.reservation = ReservationPolicy::kMax;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  for (RequestId id = 1; id <= 3; ++id) FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(id, 10, 5)));
  OutputCollector out;
  FOLIO_ASSERT_OK(test::Step(*s, w, out));
  // Two fit their 8-block reservations (not the 2 blocks their prompts use);
  // the third waits for one to end.
  EXPECT_EQ(DeviceUsed(*s), 16);
  EXPECT_EQ(s->num_running(), 2);
  EXPECT_EQ(s->num_waiting(), 1);
  for (const Request* r : s->RunningRequests()) {
    EXPECT_EQ(r->reserved_tokens, 64);
    EXPECT_EQ(r->seqs[0]->block_table().size(), 8);
  }
  int32_t max_running = 0;
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 100, [&](const StepPlan&, const Scheduler& sc) {
    max_running = std::max(max_running, sc.num_running());
    EXPECT_EQ(DeviceUsed(sc), 8 * sc.num_running());  // never grows past the reservation
  }));
  EXPECT_EQ(max_running, 2);
  for (RequestId id = 1; id <= 3; ++id) EXPECT_EQ(out.at(id).tokens().size(), 5u);
  ExpectDrained(*s);
}

TEST(SchedulerReservationTest, MaxReservationBeyondThePoolNeverFits) {
  SchedulerConfig c = TestConfig(10);
  c.max_model_len = 128;  // 16 blocks per request, the pool has 10
  c.reservation = ReservationPolicy::kMax;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, 10, 5)));
  auto out = test::RunToCompletion(*s, w, 10);
  FOLIO_ASSERT_OK(out.status());
  EXPECT_EQ(out->at(1).reason(), FinishReason::kError);
  EXPECT_THAT(out->at(1).error, HasSubstr("blocks"));
  ExpectDrained(*s);
}

TEST(SchedulerReservationTest, Pow2AndOracleReserveTheFinalLength) {
  struct Case {
    ReservationPolicy policy;
    int32_t blocks;
  };
  // prompt 10 + output 10 = 20 tokens: pow2 reserves 32 (4 blocks), oracle 20 (3).
  for (const Case& k : {Case{ReservationPolicy::kPow2, 4}, Case{ReservationPolicy::kOracle, 3},
                        Case{ReservationPolicy::kNone, 2}}) {
    SchedulerConfig c = TestConfig(40);
    c.reservation = k.policy;
    auto s = test::MakeScheduler(c);
    SimulatedWorker w(test::WorkerOptions(c));
    RequestSpec r = MakeRequest(1, 10, 10);
    r.expected_output_len = 10;
    FOLIO_ASSERT_OK(s->AddRequest(r));
    OutputCollector out;
    FOLIO_ASSERT_OK(test::Step(*s, w, out));
    EXPECT_EQ(DeviceUsed(*s), k.blocks) << ReservationPolicyName(k.policy);
    FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 50));
    EXPECT_EQ(out.at(1).tokens().size(), 10u);
    ExpectDrained(*s);
  }
}

// With a contiguous slot space, a reservation that finds no free range keeps
// the request waiting even though the paged pool has room; it runs later.
TEST(SchedulerReservationTest, SlotSpaceFailureKeepsRequestWaiting) {
  ContiguousSlotSpace space(40);
  SchedulerConfig c = TestConfig(100);
  c.reservation = ReservationPolicy::kOracle;
  c.reservation_space = &space;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  for (RequestId id = 1; id <= 3; ++id) {
    RequestSpec r = MakeRequest(id, 10, 10);
    r.expected_output_len = 10;
    FOLIO_ASSERT_OK(s->AddRequest(r));
  }
  OutputCollector out;
  FOLIO_ASSERT_OK(test::Step(*s, w, out));
  EXPECT_TRUE(space.holds(1));
  EXPECT_TRUE(space.holds(2));
  EXPECT_FALSE(space.holds(3));
  EXPECT_EQ(s->num_waiting(), 1);
  EXPECT_EQ(space.free_slots(), 0);
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 100));
  for (RequestId id = 1; id <= 3; ++id) {
    EXPECT_EQ(out.at(id).tokens().size(), 10u);
    EXPECT_TRUE(out.at(id).error.empty());
  }
  EXPECT_EQ(space.num_reservations(), 0);
  EXPECT_EQ(space.free_slots(), 40);
  ExpectDrained(*s);
}

TEST(SchedulerReservationTest, ClaimLargerThanTheSlotSpaceNeverFits) {
  ContiguousSlotSpace space(16);
  SchedulerConfig c = TestConfig(100);
  c.reservation = ReservationPolicy::kOracle;
  c.reservation_space = &space;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  RequestSpec big = MakeRequest(1, 10, 10);
  big.expected_output_len = 10;
  RequestSpec small = MakeRequest(2, 5, 5);
  small.expected_output_len = 5;
  FOLIO_ASSERT_OK(s->AddRequest(big));
  FOLIO_ASSERT_OK(s->AddRequest(small));
  auto out = test::RunToCompletion(*s, w, 50);
  FOLIO_ASSERT_OK(out.status());
  EXPECT_EQ(out->at(1).reason(), FinishReason::kError);
  EXPECT_THAT(out->at(1).error, HasSubstr("reservation"));
  EXPECT_EQ(out->at(2).tokens().size(), 5u);
  EXPECT_EQ(space.num_reservations(), 0);
  ExpectDrained(*s);
}

// A swapped-out request keeps (or correctly re-takes) its reservation: the
// slot space must stay consistent through swap-out, swap-in and the end.
TEST(SchedulerReservationTest, ReservationSurvivesSwapPreemption) {
  ContiguousSlotSpace space(96);
  SchedulerConfig c = TestConfig(8);
  c.max_model_len = 32;  // 4 blocks per sequence
  c.num_host_blocks = 8;
  c.reservation = ReservationPolicy::kMax;
  c.reservation_space = &space;
  c.preemption_mode = PreemptionMode::kSwap;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  RequestSpec a = MakeRequest(1, 10, 3);  // n=2: its fork's copy-on-write needs a block
  a.sampling.n = 2;
  a.sampling.best_of = 2;
  FOLIO_ASSERT_OK(s->AddRequest(a));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(2, 10, 4)));
  OutputCollector out;
  FOLIO_ASSERT_OK(test::Step(*s, w, out));
  EXPECT_EQ(DeviceUsed(*s), 8);
  FOLIO_ASSERT_OK(test::Step(*s, w, out));
  ASSERT_EQ(s->num_swapped(), 1);  // request 2 made room for the copy
  EXPECT_EQ(s->stats().num_preemptions_swap, 1);
  FOLIO_ASSERT_OK(test::RunUntilDrained(*s, w, out, 100));
  EXPECT_EQ(out.at(1).sequences.size(), 2u);
  EXPECT_EQ(out.at(2).tokens().size(), 4u);
  EXPECT_EQ(space.num_reservations(), 0);
  EXPECT_EQ(space.free_slots(), 96);
  ExpectDrained(*s);
}

// A recompute-preempted n=3 group re-reserves max_model_len per sequence at
// readmission: more than the whole pool. Once nothing else runs it must end
// (by length, with its tokens), not wait forever.
TEST(SchedulerReservationTest, ReservedGroupTooBigToReadmitEndsByLength) {
  SchedulerConfig c = TestConfig(7);
  c.max_model_len = 24;  // 3 blocks per sequence
  c.reservation = ReservationPolicy::kMax;
  c.preemption_mode = PreemptionMode::kRecompute;
  c.enable_prefix_caching = false;
  auto s = test::MakeScheduler(c);
  SimulatedWorker w(test::WorkerOptions(c));
  FOLIO_ASSERT_OK(s->AddRequest(MakeRequest(1, 5, 10)));
  RequestSpec group = MakeRequest(2, 10, 10);
  group.sampling.n = 3;
  group.sampling.best_of = 3;
  FOLIO_ASSERT_OK(s->AddRequest(group));
  auto out = test::RunToCompletion(*s, w, 50);
  FOLIO_ASSERT_OK(out.status());
  EXPECT_EQ(s->stats().num_preemptions_recompute, 1);
  EXPECT_EQ(out->at(1).tokens().size(), 10u);
  const test::CollectedRequest& g = out->at(2);
  EXPECT_THAT(g.error, HasSubstr("blocks"));
  ASSERT_EQ(g.sequences.size(), 3u);
  for (int32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(g.reason(i), FinishReason::kLength);
    EXPECT_EQ(g.tokens(i).size(), 1u);  // the fan-out's first tokens
  }
  ExpectDrained(*s);
}

}  // namespace
}  // namespace folio
