// RequestStream's messages: prompt scores (prompt_logprobs) of a long prompt
// are split over leading chunks so that no message passes gRPC's default
// 4 MiB receive limit; with a stream interval, later chunks are held and
// merged (the first token and a sequence's end go out at once) without
// losing or reordering a token, a piece of text or a log-prob.

#include "scheduler/server/request_stream.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server_test_util.h"

namespace folio {
namespace {

class RequestStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = Tokenizer::LoadFromDirectory(testing_util::kDemoDir);
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = std::move(*t);
  }

  // An output that scored `n` prompt tokens (ids 0, 1, ...) with `top`
  // alternatives each and carries one new token of sequence 0.
  static RequestOutput Scored(size_t n, int top) {
    auto scored = std::make_shared<std::vector<SampledToken>>();
    for (size_t i = 0; i < n; ++i) {
      SampledToken t{static_cast<TokenId>(i % 2000), -1.5f, {}};
      for (int k = 0; k < top; ++k) t.top_logprobs.push_back({k, -0.25f * k});
      scored->push_back(std::move(t));
    }
    RequestOutput out;
    out.request_id = 1;
    out.prompt_logprobs = std::move(scored);
    SequenceOutput& seq = out.sequences.emplace_back();
    seq.token_ids.push_back(300);
    seq.logprobs.push_back(-0.5f);
    return out;
  }

  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(RequestStreamTest, LongPromptScoresAreSplitOverLeadingChunks) {
  ParsedRequest req;
  req.spec.prompt.assign(9001, 5);
  RequestStream stream("r", *tokenizer_, req);
  RequestStream::Stopped stopped;
  const std::vector<v1::GenerateResponse> messages = stream.Consume(Scored(9000, 20), &stopped);
  ASSERT_EQ(messages.size(), 3u);
  size_t next = 0;
  for (size_t m = 0; m < messages.size(); ++m) {
    SCOPED_TRACE(m);
    ASSERT_TRUE(messages[m].has_chunk());
    EXPECT_EQ(messages[m].request_id(), "r");
    EXPECT_LT(messages[m].ByteSizeLong(), size_t{4} << 20);
    EXPECT_EQ(messages[m].chunk().deltas_size(), m + 1 == messages.size() ? 1 : 0);
    for (const v1::TokenLogprob& t : messages[m].chunk().prompt_logprobs()) {
      EXPECT_EQ(t.token_id(), static_cast<TokenId>(next++ % 2000));
      ASSERT_EQ(t.top_logprobs_size(), 20);
    }
  }
  EXPECT_EQ(next, 9000u);  // every score once, in order
  EXPECT_EQ(messages[0].chunk().prompt_logprobs_size(), 4096);
}

TEST_F(RequestStreamTest, ShortAndEmptyScoresRideInTheFirstChunk) {
  ParsedRequest req;
  req.spec.prompt.assign(6, 5);
  RequestStream stream("r", *tokenizer_, req);
  RequestStream::Stopped stopped;
  std::vector<v1::GenerateResponse> messages = stream.Consume(Scored(5, 2), &stopped);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0].chunk().prompt_logprobs_size(), 5);
  EXPECT_EQ(messages[0].chunk().deltas_size(), 1);

  // A one-token prompt has no scores, but its (empty) list still comes
  // first, even in an output without new tokens.
  RequestStream one("s", *tokenizer_, req);
  RequestOutput out = Scored(0, 0);
  out.sequences.clear();
  messages = one.Consume(out, &stopped);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_TRUE(messages[0].has_chunk());
  EXPECT_EQ(messages[0].chunk().prompt_logprobs_size(), 0);
}

// One step's output: token `token` for each of `indices` (log-prob -0.1 *
// token), finishing them with `reason` when given.
RequestOutput Step(std::vector<int32_t> indices, TokenId token,
                   FinishReason reason = FinishReason::kNone, bool finished = false) {
  RequestOutput out;
  out.request_id = 1;
  out.finished = finished;
  for (int32_t i : indices) {
    SequenceOutput& seq = out.sequences.emplace_back();
    seq.index = i;
    seq.token_ids.push_back(token + i);
    seq.logprobs.push_back(-0.1f * static_cast<float>(token + i));
    seq.top_logprobs.push_back({{token + i, -0.1f * static_cast<float>(token + i)}});
    seq.finish_reason = reason;
  }
  return out;
}

// What a client assembles from the messages: per sequence index, the
// tokens, text and log-probs in order, and the finish reason.
struct Assembled {
  std::map<uint32_t, std::vector<TokenId>> tokens;
  std::map<uint32_t, std::string> text;
  std::map<uint32_t, std::vector<float>> logprobs;
  std::map<uint32_t, v1::FinishReason> reason;
  int chunks = 0;
  bool finished = false;

  void Add(const std::vector<v1::GenerateResponse>& messages) {
    for (const v1::GenerateResponse& m : messages) {
      ASSERT_FALSE(finished) << "a message after Finished";
      if (m.has_finished()) {
        finished = true;
        continue;
      }
      ++chunks;
      for (const v1::SequenceDelta& d : m.chunk().deltas()) {
        tokens[d.index()].insert(tokens[d.index()].end(), d.token_ids().begin(),
                                 d.token_ids().end());
        text[d.index()] += d.text();
        ASSERT_EQ(d.logprobs_size(), d.token_ids_size());
        for (const v1::TokenLogprob& lp : d.logprobs()) {
          logprobs[d.index()].push_back(lp.logprob());
          ASSERT_LE(lp.top_logprobs_size(), 1);
        }
        if (d.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) reason[d.index()] = d.finish_reason();
      }
    }
  }
};

TEST_F(RequestStreamTest, AStreamIntervalMergesChunksAndSendsTheFirstTokenAtOnce) {
  ParsedRequest req;
  req.spec.prompt.assign(4, 5);
  req.logprobs = 1;
  RequestStream every("r", *tokenizer_, req);
  RequestStream held("r", *tokenizer_, req, /*stream_interval=*/4);
  Assembled a, b;
  RequestStream::Stopped stopped;
  std::vector<int> sent_after;  // held's messages after each step
  for (TokenId t = 300; t < 310; ++t) {
    const bool last = t == 309;
    const RequestOutput out = Step({0}, t, last ? FinishReason::kLength : FinishReason::kNone, last);
    a.Add(every.Consume(out, &stopped));
    const std::vector<v1::GenerateResponse> m = held.Consume(out, &stopped);
    sent_after.push_back(static_cast<int>(m.size()));
    b.Add(m);
  }
  // Token 1 at once; tokens 2-5 and 6-9 once four are held; token 10 with
  // the end (its chunk, then Finished).
  EXPECT_EQ(sent_after, (std::vector<int>{1, 0, 0, 0, 1, 0, 0, 0, 1, 2}));
  EXPECT_EQ(a.chunks, 10);
  EXPECT_EQ(b.chunks, 4);
  EXPECT_TRUE(a.finished && b.finished);
  EXPECT_EQ(b.tokens, a.tokens);
  EXPECT_EQ(b.text, a.text);
  EXPECT_EQ(b.logprobs, a.logprobs);
  EXPECT_EQ(b.reason, a.reason);
  EXPECT_EQ(b.tokens[0].size(), 10u);
  EXPECT_FALSE(b.text[0].empty());
}

TEST_F(RequestStreamTest, ASequenceThatEndsIsSentAtOnceWithWhatWasHeld) {
  ParsedRequest req;
  req.spec.prompt.assign(4, 5);
  req.spec.sampling.n = 2;
  req.logprobs = 1;
  RequestStream held("r", *tokenizer_, req, /*stream_interval=*/8);
  Assembled b;
  RequestStream::Stopped stopped;
  b.Add(held.Consume(Step({0, 1}, 300), &stopped));  // the first tokens: sent
  EXPECT_EQ(b.chunks, 1);
  EXPECT_TRUE(held.Consume(Step({0, 1}, 302), &stopped).empty());
  // Sequence 1 ends (EOS) while 0 goes on: both deltas go out merged.
  RequestOutput out = Step({0}, 304);
  SequenceOutput& eos = out.sequences.emplace_back();
  eos.index = 1;
  eos.token_ids.push_back(2);
  eos.logprobs.push_back(-0.2f);
  eos.top_logprobs.push_back({{2, -0.2f}});
  eos.finish_reason = FinishReason::kEos;
  const std::vector<v1::GenerateResponse> m = held.Consume(out, &stopped);
  ASSERT_EQ(m.size(), 1u);
  ASSERT_EQ(m[0].chunk().deltas_size(), 2);
  b.Add(m);
  EXPECT_EQ(b.tokens[0], (std::vector<TokenId>{300, 302, 304}));
  EXPECT_EQ(b.tokens[1], (std::vector<TokenId>{301, 303, 2}));
  EXPECT_EQ(b.logprobs[1].size(), 3u);
  EXPECT_EQ(b.reason[1], v1::FINISH_REASON_EOS);
  EXPECT_EQ(b.reason.count(0), 0u);
  EXPECT_FALSE(b.finished);
}

TEST_F(RequestStreamTest, AFailureSendsWhatWasHeldBeforeFinished) {
  ParsedRequest req;
  req.spec.prompt.assign(4, 5);
  req.logprobs = 0;  // the sampled tokens' own log-probs only
  RequestStream held("r", *tokenizer_, req, /*stream_interval=*/16);
  Assembled b;
  RequestStream::Stopped stopped;
  for (TokenId t = 300; t < 305; ++t) b.Add(held.Consume(Step({0}, t), &stopped));
  EXPECT_EQ(b.chunks, 1);  // only the first token so far
  const std::vector<v1::GenerateResponse> last = held.Fail("the worker group failed");
  ASSERT_EQ(last.size(), 2u);
  b.Add(last);
  EXPECT_TRUE(b.finished);
  EXPECT_EQ(b.tokens[0], (std::vector<TokenId>{300, 301, 302, 303, 304}));
  ASSERT_TRUE(last[1].has_finished());
  EXPECT_EQ(last[1].finished().usage().completion_tokens(), 5u);
  EXPECT_EQ(last[1].finished().sequences(0).reason(), v1::FINISH_REASON_ERROR);
}

}  // namespace
}  // namespace folio
