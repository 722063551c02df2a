// The engine loop on the demo model with an in-process CPU worker: greedy
// streams reproduce reference.json, stop strings and stop tokens, n / beam
// search, abort, shutdown, worker failure, refused requests, and a pool too
// small for the load. Every workload ends with every KV block free.

#include "scheduler/server/engine.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server_test_util.h"

namespace folio {
namespace {

using ::testing::HasSubstr;
using namespace testing_util;

constexpr int kMaxTokens = 24;

TEST(EngineTest, GreedyStreamsReproduceTheReference) {
  std::unique_ptr<Engine> engine = MakeDemoEngine();
  ASSERT_NE(engine, nullptr);
  auto tokenizer = Tokenizer::LoadFromDirectory(kDemoDir);
  ASSERT_TRUE(tokenizer.ok());
  const std::vector<ReferenceCase> cases = LoadReference();
  std::vector<Submitted> subs;
  for (const ReferenceCase& c : cases) {
    v1::GenerateRequest r = GreedyRequest(c.prompt, kMaxTokens);
    r.mutable_sampling_params()->set_logprobs(0);
    subs.push_back(Submit(*engine, r));
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_TRUE(subs[i].sink->Wait());
    v1::Usage usage;
    const std::vector<StreamedSequence> seqs = Reassemble(subs[i].sink->responses(), &usage);
    ASSERT_EQ(seqs.size(), 1u);
    const std::vector<TokenId> want(cases[i].output_ids.begin(), cases[i].output_ids.begin() + kMaxTokens);
    EXPECT_EQ(seqs[0].token_ids, want) << "case " << i;
    ASSERT_EQ(seqs[0].logprobs.size(), want.size());
    for (int t = 0; t < kMaxTokens; ++t) EXPECT_NEAR(seqs[0].logprobs[t], cases[i].logprobs[t], 1e-3);
    EXPECT_EQ(seqs[0].text, (*tokenizer)->Decode(seqs[0].token_ids));
    EXPECT_EQ(seqs[0].finish.reason(), v1::FINISH_REASON_LENGTH);
    EXPECT_EQ(usage.prompt_tokens(), cases[i].prompt_ids.size());
    EXPECT_EQ(usage.completion_tokens(), static_cast<uint32_t>(kMaxTokens));
    for (const v1::GenerateResponse& r : subs[i].sink->responses()) EXPECT_EQ(r.request_id(), subs[i].id);
  }
  ExpectDrained(*engine, 256);
}

TEST(EngineTest, StopStringEndsTheSequenceAndIsNotReturned) {
  std::unique_ptr<Engine> engine = MakeDemoEngine();
  ASSERT_NE(engine, nullptr);
  auto tokenizer = Tokenizer::LoadFromDirectory(kDemoDir);
  const ReferenceCase c = LoadReference()[0];
  const std::vector<TokenId> out(c.output_ids.begin(), c.output_ids.begin() + kMaxTokens);
  const std::string full = (*tokenizer)->Decode(out);
  // A stop string from the middle of the reference continuation.
  const std::string stop = full.substr(full.size() / 2, 4);
  v1::GenerateRequest r = GreedyRequest(c.prompt, kMaxTokens);
  r.mutable_sampling_params()->add_stop(stop);
  Submitted s = Submit(*engine, r);
  ASSERT_TRUE(s.sink->Wait());
  const std::vector<StreamedSequence> seqs = Reassemble(s.sink->responses());
  ASSERT_EQ(seqs.size(), 1u);
  EXPECT_EQ(seqs[0].text, full.substr(0, full.find(stop)));
  EXPECT_EQ(seqs[0].finish.reason(), v1::FINISH_REASON_STOP);
  EXPECT_EQ(seqs[0].finish.stop_string(), stop);
  EXPECT_LT(seqs[0].token_ids.size(), out.size());
  ExpectDrained(*engine, 256);
}

TEST(EngineTest, StopTokenIdEndsTheSequence) {
  std::unique_ptr<Engine> engine = MakeDemoEngine();
  ASSERT_NE(engine, nullptr);
  const ReferenceCase c = LoadReference()[1];
  const TokenId stop_token = c.output_ids[6];
  const size_t first = std::find(c.output_ids.begin(), c.output_ids.end(), stop_token) - c.output_ids.begin();
  v1::GenerateRequest r = GreedyRequest(c.prompt, kMaxTokens);
  r.mutable_sampling_params()->add_stop_token_ids(stop_token);
  Submitted s = Submit(*engine, r);
  ASSERT_TRUE(s.sink->Wait());
  const std::vector<StreamedSequence> seqs = Reassemble(s.sink->responses());
  ASSERT_EQ(seqs.size(), 1u);
  EXPECT_EQ(seqs[0].finish.reason(), v1::FINISH_REASON_STOP);
  EXPECT_EQ(seqs[0].finish.stop_token_id(), stop_token);
  EXPECT_EQ(seqs[0].token_ids.size(), first + 1);
  // The stop token is in the ids but not in the text (as in vLLM).
  auto tokenizer = Tokenizer::LoadFromDirectory(kDemoDir);
  ASSERT_TRUE(tokenizer.ok());
  const std::vector<TokenId> before(c.output_ids.begin(), c.output_ids.begin() + first);
  EXPECT_EQ(seqs[0].text, (*tokenizer)->Decode(before));
  ExpectDrained(*engine, 256);
}

// n = 2: a stop string only the first sequence produces ends it alone (the
// engine stops it in the scheduler); the other runs to max_tokens with the
// tokens it has without the stop.
TEST(EngineTest, StopStringEndsOneOfParallelSequences) {
  std::unique_ptr<Engine> engine = MakeDemoEngine();
  ASSERT_NE(engine, nullptr);
  v1::GenerateRequest r = GreedyRequest("And God said", 30);
  r.mutable_sampling_params()->set_temperature(0.9f);
  r.mutable_sampling_params()->set_seed(5);
  r.mutable_sampling_params()->set_n(2);
  r.mutable_sampling_params()->set_ignore_eos(true);
  Submitted free_run = Submit(*engine, r);
  ASSERT_TRUE(free_run.sink->Wait());
  const std::vector<StreamedSequence> want = Reassemble(free_run.sink->responses());
  ASSERT_EQ(want.size(), 2u);
  // Four characters early in sequence 0's text that sequence 1 never shows.
  std::string stop;
  for (size_t at = 4; at + 4 <= want[0].text.size() / 2 && stop.empty(); ++at) {
    const std::string cand = want[0].text.substr(at, 4);
    if (want[1].text.find(cand) == std::string::npos && want[0].text.find(cand) == at) stop = cand;
  }
  ASSERT_FALSE(stop.empty()) << want[0].text << " / " << want[1].text;
  r.mutable_sampling_params()->add_stop(stop);
  Submitted s = Submit(*engine, r);
  ASSERT_TRUE(s.sink->Wait());
  v1::Usage usage;
  const std::vector<StreamedSequence> got = Reassemble(s.sink->responses(), &usage);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].text, want[0].text.substr(0, want[0].text.find(stop)));
  EXPECT_EQ(got[0].finish.reason(), v1::FINISH_REASON_STOP);
  EXPECT_EQ(got[0].finish.stop_string(), stop);
  EXPECT_LT(got[0].token_ids.size(), want[0].token_ids.size());
  EXPECT_EQ(got[1].token_ids, want[1].token_ids);
  EXPECT_EQ(got[1].finish.reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(usage.completion_tokens(), got[0].token_ids.size() + got[1].token_ids.size());
  ExpectDrained(*engine, 256);
}

TEST(EngineTest, ParallelSamplingAndBeamSearchReturnEverySequence) {
  std::unique_ptr<Engine> engine = MakeDemoEngine();
  ASSERT_NE(engine, nullptr);
  v1::GenerateRequest sampled = GreedyRequest("And God said", 12);
  sampled.mutable_sampling_params()->set_temperature(0.8f);
  sampled.mutable_sampling_params()->set_seed(11);
  sampled.mutable_sampling_params()->set_n(3);
  v1::GenerateRequest best = sampled;
  best.mutable_sampling_params()->set_n(2);
  best.mutable_sampling_params()->set_best_of(4);
  v1::GenerateRequest beam = GreedyRequest("And the earth", 10);
  beam.mutable_sampling_params()->set_beam_width(3);
  beam.mutable_sampling_params()->set_n(2);
  Submitted a = Submit(*engine, sampled), b = Submit(*engine, best), c = Submit(*engine, beam);
  for (Submitted* s : {&a, &b, &c}) ASSERT_TRUE(s->sink->Wait());
  auto check = [](const Submitted& s, size_t n, size_t max_tokens) {
    const std::vector<StreamedSequence> seqs = Reassemble(s.sink->responses());
    ASSERT_EQ(seqs.size(), n);
    for (const StreamedSequence& q : seqs) {
      EXPECT_GT(q.token_ids.size(), 0u);
      EXPECT_LE(q.token_ids.size(), max_tokens);
      EXPECT_NE(q.finish.reason(), v1::FINISH_REASON_UNSPECIFIED);
      EXPECT_NE(q.finish.reason(), v1::FINISH_REASON_ERROR);
    }
  };
  check(a, 3, 12);
  check(b, 2, 12);
  check(c, 2, 10);
  // Seeded sampling repeats itself.
  Submitted again = Submit(*engine, sampled);
  ASSERT_TRUE(again.sink->Wait());
  const auto first = Reassemble(a.sink->responses()), second = Reassemble(again.sink->responses());
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(first[i].token_ids, second[i].token_ids);
  ExpectDrained(*engine, 256);
}

TEST(EngineTest, AbortEndsAStreamMidwayAndFreesItsBlocks) {
  std::unique_ptr<Engine> engine = MakeDemoEngine();
  ASSERT_NE(engine, nullptr);
  v1::GenerateRequest r = GreedyRequest("In the beginning", 400);
  r.set_request_id("long-one");
  Submitted s = Submit(*engine, r);
  EXPECT_EQ(s.id, "long-one");
  ASSERT_TRUE(s.sink->WaitFirstChunk());
  EXPECT_TRUE(engine->Abort("long-one"));
  ASSERT_TRUE(s.sink->Wait());
  const std::vector<StreamedSequence> seqs = Reassemble(s.sink->responses());
  ASSERT_EQ(seqs.size(), 1u);
  EXPECT_EQ(seqs[0].finish.reason(), v1::FINISH_REASON_ABORT);
  EXPECT_LT(seqs[0].token_ids.size(), 400u);
  EXPECT_FALSE(engine->Abort("long-one"));  // no longer live
  ExpectDrained(*engine, 256);
}

TEST(EngineTest, RefusesDuplicateIdsAndRequestsTheSchedulerCannotRun) {
  std::unique_ptr<Engine> engine = MakeDemoEngine();
  ASSERT_NE(engine, nullptr);
  v1::GenerateRequest r = GreedyRequest("In the beginning", 200);
  r.set_request_id("dup");
  Submitted first = Submit(*engine, r);
  absl::StatusOr<std::string> second = engine->Submit(r, std::make_shared<RecordingSink>());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  engine->Abort("dup");
  ASSERT_TRUE(first.sink->Wait());

  // best_of beyond max_num_seqs can never run: refused, not queued forever.
  v1::GenerateRequest wide = GreedyRequest("In the beginning", 4);
  wide.mutable_sampling_params()->set_best_of(65);
  wide.mutable_sampling_params()->set_temperature(1);
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(engine->Submit(wide, sink).ok());
  ASSERT_TRUE(sink->Wait());
  EXPECT_EQ(sink->error().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(sink->error().message()), HasSubstr("best_of"));
  EXPECT_TRUE(sink->responses().empty());

  // Still serving.
  Submitted ok = Submit(*engine, GreedyRequest("And God", 3));
  ASSERT_TRUE(ok.sink->Wait());
  EXPECT_EQ(Reassemble(ok.sink->responses())[0].token_ids.size(), 3u);
  ExpectDrained(*engine, 256);
}

// Overload: beyond --max-waiting-requests (or the waiting prompt tokens'
// bound) Submit says RESOURCE_EXHAUSTED at once; once the queue drains, the
// same request is served. The engine starts late, so the queue holds still.
TEST(EngineTest, BoundedWaitingQueueRefusesTheOverflow) {
  EngineSetup setup;
  setup.start = false;
  setup.max_waiting_requests = 2;
  std::unique_ptr<Engine> engine = MakeDemoEngine(setup);
  ASSERT_NE(engine, nullptr);
  Submitted a = Submit(*engine, GreedyTokenRequest(5, 3));
  Submitted b = Submit(*engine, GreedyTokenRequest(5, 3));
  absl::StatusOr<std::string> c =
      engine->Submit(GreedyTokenRequest(5, 3), std::make_shared<RecordingSink>());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("overloaded: 2 requests waiting (--max-waiting-requests 2)"));
  engine->Start();
  ASSERT_TRUE(a.sink->Wait());
  ASSERT_TRUE(b.sink->Wait());
  ASSERT_TRUE(engine->WaitIdle(absl::Seconds(10)));
  Submitted later = Submit(*engine, GreedyTokenRequest(5, 3));
  ASSERT_TRUE(later.sink->Wait());
  EXPECT_EQ(Reassemble(later.sink->responses())[0].token_ids.size(), 3u);
  ExpectDrained(*engine, 256);
}

// The same bound while the engine runs: the waiting request is counted once
// the scheduler holds it (the engine's snapshot), not only in the inbox.
TEST(EngineTest, BoundedWaitingQueueCountsWhatTheSchedulerHolds) {
  EngineSetup setup;
  setup.max_num_seqs = 1;
  setup.max_waiting_requests = 1;
  std::unique_ptr<Engine> engine = MakeDemoEngine(setup);
  ASSERT_NE(engine, nullptr);
  Submitted running = Submit(*engine, GreedyTokenRequest(5, 400));
  ASSERT_TRUE(running.sink->WaitFirstChunk());
  Submitted waiting = Submit(*engine, GreedyTokenRequest(5, 3));
  for (int i = 0; i < 2000 && engine->Snapshot().num_waiting_tokens != 5; ++i) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(engine->Snapshot().num_waiting, 1);
  EXPECT_EQ(engine->Submit(GreedyTokenRequest(5, 3), std::make_shared<RecordingSink>())
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(engine->Abort(running.id));
  ASSERT_TRUE(waiting.sink->Wait());
  EXPECT_EQ(Reassemble(waiting.sink->responses())[0].token_ids.size(), 3u);
  ExpectDrained(*engine, 256);
}

TEST(EngineTest, BoundedWaitingTokensRefuseTheOverflowButNotALoneLongPrompt) {
  EngineSetup setup;
  setup.start = false;
  setup.max_waiting_tokens = 12;
  std::unique_ptr<Engine> engine = MakeDemoEngine(setup);
  ASSERT_NE(engine, nullptr);
  // Alone, a prompt past the bound still queues (max_model_len bounds it).
  Submitted lone = Submit(*engine, GreedyTokenRequest(20, 2));
  absl::StatusOr<std::string> refused =
      engine->Submit(GreedyTokenRequest(1, 2), std::make_shared<RecordingSink>());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("overloaded: 1 request with 20 prompt tokens waiting "
                        "(--max-waiting-tokens 12)"));
  engine->Start();
  ASSERT_TRUE(lone.sink->Wait());
  ASSERT_TRUE(engine->WaitIdle(absl::Seconds(10)));
  // 8 + 4 tokens fit the bound, one more does not.
  EngineSetup held = setup;
  std::unique_ptr<Engine> second = MakeDemoEngine(held);
  ASSERT_NE(second, nullptr);
  Submitted eight = Submit(*second, GreedyTokenRequest(8, 2));
  Submitted four = Submit(*second, GreedyTokenRequest(4, 2));
  EXPECT_EQ(second->Submit(GreedyTokenRequest(1, 2), std::make_shared<RecordingSink>())
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted);
  second->Start();
  ASSERT_TRUE(eight.sink->Wait());
  ASSERT_TRUE(four.sink->Wait());
  ExpectDrained(*engine, 256);
  ExpectDrained(*second, 256);
}

TEST(EngineTest, ShutdownAbortsEveryLiveRequest) {
  std::unique_ptr<Engine> engine = MakeDemoEngine();
  ASSERT_NE(engine, nullptr);
  std::vector<Submitted> subs;
  for (int i = 0; i < 4; ++i) subs.push_back(Submit(*engine, GreedyRequest("In the beginning", 500)));
  ASSERT_TRUE(subs[0].sink->WaitFirstChunk());
  engine->Shutdown();
  for (Submitted& s : subs) {
    ASSERT_TRUE(s.sink->Wait(absl::Seconds(1)));
    EXPECT_EQ(Reassemble(s.sink->responses())[0].finish.reason(), v1::FINISH_REASON_ABORT);
  }
  EXPECT_EQ(engine->Submit(GreedyRequest("x", 1), std::make_shared<RecordingSink>()).status().code(),
            absl::StatusCode::kUnavailable);
  const EngineSnapshot snap = engine->Snapshot();
  EXPECT_EQ(snap.num_free_device_blocks, 256);
  EXPECT_TRUE(engine->CheckDrained().ok()) << engine->CheckDrained();
}

TEST(EngineTest, AWorkerFailureEndsEveryRequestWithAnError) {
  CpuWorkerGroup* group = nullptr;
  EngineSetup setup;
  setup.group_out = &group;
  std::atomic<int> failures{0};
  setup.on_failure = [&](const absl::Status& status) {
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
    ++failures;
  };
  std::unique_ptr<Engine> engine = MakeDemoEngine(setup);
  ASSERT_NE(engine, nullptr);
  Submitted before = Submit(*engine, GreedyRequest("In the beginning", 3));
  ASSERT_TRUE(before.sink->Wait());
  ASSERT_TRUE(engine->WaitIdle(absl::Seconds(10)));
  group->FailFromStep(0);  // every later step fails
  Submitted s = Submit(*engine, GreedyRequest("In the beginning", 50));
  ASSERT_TRUE(s.sink->Wait());
  const std::vector<StreamedSequence> seqs = Reassemble(s.sink->responses());
  ASSERT_EQ(seqs.size(), 1u);
  EXPECT_EQ(seqs[0].finish.reason(), v1::FINISH_REASON_ERROR);
  EXPECT_THAT(seqs[0].finish.error_message(), HasSubstr("injected worker failure"));
  EXPECT_FALSE(engine->healthy());
  EXPECT_EQ(failures.load(), 1);  // told once, so the server can turn NOT_SERVING
  EXPECT_EQ(engine->Submit(GreedyRequest("x", 1), std::make_shared<RecordingSink>()).status().code(),
            absl::StatusCode::kUnavailable);
}

// --stream-interval 5: the same streams (tokens, text, log-probs, finish) in
// fewer chunks, for greedy, parallel-sampled and stop-string requests; a
// worker failure still delivers every held token before the error.
TEST(EngineTest, AStreamIntervalSendsTheSameStreamsInFewerChunks) {
  const ReferenceCase c = LoadReference()[0];
  auto requests = [&] {
    std::vector<v1::GenerateRequest> rs;
    rs.push_back(GreedyRequest(c.prompt, kMaxTokens));
    rs.back().mutable_sampling_params()->set_logprobs(1);
    v1::GenerateRequest sampled = GreedyRequest("And God said", 30);
    sampled.mutable_sampling_params()->set_temperature(0.9f);
    sampled.mutable_sampling_params()->set_seed(5);
    sampled.mutable_sampling_params()->set_n(2);
    sampled.mutable_sampling_params()->set_ignore_eos(true);
    rs.push_back(sampled);
    auto tokenizer = Tokenizer::LoadFromDirectory(kDemoDir);
    const std::string text = (*tokenizer)->Decode(
        std::vector<TokenId>(c.output_ids.begin(), c.output_ids.begin() + kMaxTokens));
    rs.push_back(GreedyRequest(c.prompt, kMaxTokens));
    rs.back().mutable_sampling_params()->add_stop(text.substr(text.size() / 2, 4));
    return rs;
  };
  std::vector<std::vector<StreamedSequence>> streams[2];
  std::vector<int> chunks[2];
  for (int k = 0; k < 2; ++k) {
    EngineSetup setup;
    setup.stream_interval = k == 0 ? 1 : 5;
    std::unique_ptr<Engine> engine = MakeDemoEngine(setup);
    ASSERT_NE(engine, nullptr);
    for (const v1::GenerateRequest& r : requests()) {
      Submitted sub = Submit(*engine, r);
      ASSERT_TRUE(sub.sink->Wait());
      const std::vector<v1::GenerateResponse> responses = sub.sink->responses();
      streams[k].push_back(Reassemble(responses));
      chunks[k].push_back(static_cast<int>(std::count_if(
          responses.begin(), responses.end(), [](const auto& m) { return m.has_chunk(); })));
    }
    ExpectDrained(*engine, setup.num_device_blocks);
  }
  ASSERT_EQ(streams[0].size(), streams[1].size());
  for (size_t i = 0; i < streams[0].size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(streams[0][i].size(), streams[1][i].size());
    for (size_t j = 0; j < streams[0][i].size(); ++j) {
      const StreamedSequence& a = streams[0][i][j];
      const StreamedSequence& b = streams[1][i][j];
      EXPECT_EQ(b.token_ids, a.token_ids);
      EXPECT_EQ(b.text, a.text);
      EXPECT_EQ(b.logprobs, a.logprobs);
      EXPECT_EQ(b.finish.reason(), a.finish.reason());
      EXPECT_EQ(b.finish.stop_string(), a.finish.stop_string());
    }
  }
  EXPECT_EQ(chunks[0][0], kMaxTokens);  // one a step
  // The first token alone, then 5 at a time: 1 + ceil(23 / 5).
  EXPECT_EQ(chunks[1][0], 6);
  EXPECT_LT(chunks[1][1], chunks[0][1]);
  EXPECT_EQ(streams[0][2][0].finish.reason(), v1::FINISH_REASON_STOP);

  // Held tokens are not lost to a worker failure: the stream gets them, then
  // the error, and its usage counts them.
  CpuWorkerGroup* group = nullptr;
  EngineSetup setup;
  setup.group_out = &group;
  setup.stream_interval = 16;
  setup.on_failure = [](const absl::Status&) {};
  std::unique_ptr<Engine> engine = MakeDemoEngine(setup);
  ASSERT_NE(engine, nullptr);
  group->FailFromStep(8);  // the prompt step, then 7 decode steps
  Submitted sub = Submit(*engine, GreedyRequest(c.prompt, 50));
  ASSERT_TRUE(sub.sink->Wait());
  v1::Usage usage;
  const std::vector<StreamedSequence> failed = Reassemble(sub.sink->responses(), &usage);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].finish.reason(), v1::FINISH_REASON_ERROR);
  EXPECT_EQ(failed[0].token_ids.size(), 8u);
  EXPECT_EQ(usage.completion_tokens(), 8u);
  EXPECT_EQ(failed[0].token_ids,
            std::vector<TokenId>(c.output_ids.begin(), c.output_ids.begin() + 8));
}

// Four sequences of one request outgrow a 4-block pool together: they stop
// short of max_tokens, with LENGTH and a message saying why (as `folio run`
// reports it), and every block comes back.
TEST(EngineTest, ARequestOutgrowingThePoolFinishesWithLengthAndSaysWhy) {
  EngineSetup setup;
  setup.num_device_blocks = 4;  // 64 token slots
  std::unique_ptr<Engine> engine = MakeDemoEngine(setup);
  ASSERT_NE(engine, nullptr);
  v1::GenerateRequest r = GreedyRequest("And God said", 40);
  r.mutable_sampling_params()->set_n(4);
  r.mutable_sampling_params()->set_temperature(1);
  r.mutable_sampling_params()->set_seed(3);
  r.mutable_sampling_params()->set_ignore_eos(true);
  Submitted s = Submit(*engine, r);
  ASSERT_TRUE(s.sink->Wait());
  const std::vector<StreamedSequence> seqs = Reassemble(s.sink->responses());
  ASSERT_EQ(seqs.size(), 4u);
  for (const StreamedSequence& seq : seqs) {
    EXPECT_EQ(seq.finish.reason(), v1::FINISH_REASON_LENGTH);
    EXPECT_LT(seq.token_ids.size(), 40u);
    EXPECT_THAT(seq.finish.error_message(), HasSubstr("cannot hold"));
  }
  ExpectDrained(*engine, setup.num_device_blocks);
}

// A pool far too small for the load: preemption (recompute and swap) gives
// the same greedy tokens as an ample pool.
TEST(EngineTest, PreemptionUnderATinyPoolKeepsTheOutputs) {
  const std::vector<ReferenceCase> cases = LoadReference();
  for (PreemptionMode mode : {PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
    EngineSetup setup;
    setup.num_device_blocks = 12;  // 192 token slots for 8 prompts + 24 tokens each
    setup.num_host_blocks = mode == PreemptionMode::kSwap ? 64 : 0;
    setup.preemption_mode = mode;
    std::unique_ptr<Engine> engine = MakeDemoEngine(setup);
    ASSERT_NE(engine, nullptr);
    std::vector<Submitted> subs;
    for (const ReferenceCase& c : cases) subs.push_back(Submit(*engine, GreedyRequest(c.prompt, kMaxTokens)));
    for (size_t i = 0; i < cases.size(); ++i) {
      ASSERT_TRUE(subs[i].sink->Wait());
      const std::vector<TokenId> want(cases[i].output_ids.begin(), cases[i].output_ids.begin() + kMaxTokens);
      EXPECT_EQ(Reassemble(subs[i].sink->responses())[0].token_ids, want)
          << "case " << i << " mode " << PreemptionModeName(mode);
    }
    EXPECT_GT(engine->Snapshot().num_preemptions, 0) << "the pool was meant to be too small";
    ExpectDrained(*engine, setup.num_device_blocks, setup.num_host_blocks);
  }
}

}  // namespace
}  // namespace folio
