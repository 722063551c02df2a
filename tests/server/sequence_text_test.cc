// SequenceText: streaming detokenization with stop strings held back.

#include "scheduler/server/sequence_text.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server_test_util.h"

namespace folio {
namespace {

using testing_util::kDemoDir;

class SequenceTextTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto t = Tokenizer::LoadFromDirectory(kDemoDir);
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = t->release();
  }
  static void TearDownTestSuite() { delete tokenizer_; }

  // Streams `ids` through a SequenceText; returns the concatenated output.
  static std::string Stream(const std::vector<TokenId>& ids, const std::vector<std::string>& stops,
                            std::string* matched = nullptr, size_t* tokens_used = nullptr) {
    SequenceText text(*tokenizer_, stops);
    std::string out;
    size_t used = 0;
    for (TokenId id : ids) {
      out += text.Append(id);
      ++used;
      if (text.stopped()) break;
    }
    if (text.stopped()) {
      if (matched != nullptr) *matched = text.matched_stop();
    } else {
      out += text.Finish();
    }
    if (tokens_used != nullptr) *tokens_used = used;
    return out;
  }

  static Tokenizer* tokenizer_;
};
Tokenizer* SequenceTextTest::tokenizer_ = nullptr;

TEST_F(SequenceTextTest, WithoutStopsTheStreamIsTheFullDecode) {
  for (const std::string s : {"In the beginning God created the heaven and the earth.",
                              "我很感谢你的热情", "mixed 😀 emoji and ümlauts"}) {
    const std::vector<TokenId> ids = tokenizer_->Encode(s);
    EXPECT_EQ(Stream(ids, {}), tokenizer_->Decode(ids)) << s;
  }
}

TEST_F(SequenceTextTest, CutsRightBeforeAStopStringSpanningTokens) {
  const std::string s = "And God said, Let there be light: and there was light.";
  const std::vector<TokenId> ids = tokenizer_->Encode(s);
  std::string matched;
  size_t used = 0;
  EXPECT_EQ(Stream(ids, {"be light"}, &matched, &used), "And God said, Let there ");
  EXPECT_EQ(matched, "be light");
  EXPECT_LT(used, ids.size());  // stopped as soon as the stop string completed
}

TEST_F(SequenceTextTest, TheFirstStopToCompleteWins) {
  const std::vector<TokenId> ids = tokenizer_->Encode("the waters under the firmament");
  std::string matched;
  EXPECT_EQ(Stream(ids, {"firmament", "under"}, &matched), "the waters ");
  EXPECT_EQ(matched, "under");
}

TEST_F(SequenceTextTest, StopAtTheVeryStartGivesNoText) {
  const std::vector<TokenId> ids = tokenizer_->Encode("light and darkness");
  std::string matched;
  EXPECT_EQ(Stream(ids, {"light"}, &matched), "");
  EXPECT_EQ(matched, "light");
}

TEST_F(SequenceTextTest, AnUnmatchedStopPrefixIsReleasedAtTheEnd) {
  const std::vector<TokenId> ids = tokenizer_->Encode("and the evening");
  EXPECT_EQ(Stream(ids, {"evening star"}), "and the evening");
}

TEST_F(SequenceTextTest, MultiByteStopStrings) {
  const std::vector<TokenId> ids = tokenizer_->Encode("我很感谢你的热情");
  std::string matched;
  EXPECT_EQ(Stream(ids, {"你的"}, &matched), "我很感谢");
  EXPECT_EQ(matched, "你的");
}

// Any text, any stop cut from it: the stream is the decode cut before the
// stop's first occurrence, and no returned piece is broken UTF-8.
TEST_F(SequenceTextTest, RandomTextsAndStops) {
  const std::string corpus =
      "In the beginning God created the heaven and the earth. And the earth was without "
      "form, and void; 我很感谢你的热情 and darkness was upon the face of the deep. ÄÖÜ ß";
  std::mt19937 rng(7);
  for (int iter = 0; iter < 300; ++iter) {
    const size_t a = rng() % corpus.size(), len = 1 + rng() % 80;
    std::string text = corpus.substr(a, len);
    const std::vector<TokenId> ids = tokenizer_->Encode(text);
    const std::string decoded = tokenizer_->Decode(ids);
    const size_t sa = rng() % decoded.size(), slen = 1 + rng() % 6;
    std::string stop = decoded.substr(sa, slen);
    SequenceText seq(*tokenizer_, std::vector<std::string>{stop});
    std::string out;
    for (TokenId id : ids) {
      const std::string piece = seq.Append(id);
      out += piece;
      if (seq.stopped()) break;
    }
    if (!seq.stopped()) out += seq.Finish();
    const size_t at = decoded.find(stop);
    ASSERT_NE(at, std::string::npos);
    EXPECT_TRUE(seq.stopped()) << "text '" << decoded << "' stop '" << stop << "'";
    EXPECT_EQ(out, decoded.substr(0, at)) << "text '" << decoded << "' stop '" << stop << "'";
  }
}

}  // namespace
}  // namespace folio
