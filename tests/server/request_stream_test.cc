// RequestStream's messages for prompt scores (prompt_logprobs): a long
// prompt's are split over leading chunks so that no message passes gRPC's
// default 4 MiB receive limit.

#include "scheduler/server/request_stream.h"

#include <memory>
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

}  // namespace
}  // namespace folio
