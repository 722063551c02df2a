// SequenceText: streaming detokenization with stop strings held back, and
// the request's text options (include_stop_str_in_output, min_tokens,
// skip_special_tokens).

#include "scheduler/server/sequence_text.h"

#include <optional>
#include <random>
#include <tuple>
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
                            std::string* matched = nullptr, size_t* tokens_used = nullptr,
                            const TextOptions& options = {}) {
    SequenceText text(*tokenizer_, stops, options);
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


TEST_F(SequenceTextTest, IncludeStopKeepsTheStopStringAndHoldsNothingBack) {
  const std::string s = "And God said, Let there be light: and there was light.";
  const std::vector<TokenId> ids = tokenizer_->Encode(s);
  std::string matched;
  TextOptions include;
  include.include_stop = true;
  EXPECT_EQ(Stream(ids, {"be light"}, &matched, nullptr, include), "And God said, Let there be light");
  EXPECT_EQ(matched, "be light");
  // Nothing is held back: after every token the stream is the decode so far.
  SequenceText text(*tokenizer_, std::vector<std::string>{"no such stop"}, include);
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    out += text.Append(ids[i]);
    EXPECT_EQ(out, tokenizer_->Decode(std::span(ids).first(i + 1))) << "after token " << i;
  }
}

TEST_F(SequenceTextTest, StopStringsCountFromMinTokensOn) {
  const std::string s = "light and light and darkness";
  const std::vector<TokenId> ids = tokenizer_->Encode(s);
  // The token whose text completes the first "light".
  int32_t first_end = 0;
  while (tokenizer_->Decode(std::span(ids).first(first_end)).find("light") == std::string::npos) {
    ++first_end;
  }
  // first_end tokens complete it: with min_tokens = first_end it is too early.
  TextOptions late;
  late.min_tokens = first_end;
  std::string matched;
  EXPECT_EQ(Stream(ids, {"light"}, &matched, nullptr, late), "light and ");
  EXPECT_EQ(matched, "light");
  // A shorter stop string that also ended too early does not count later
  // either, although a longer one makes the search look back further.
  EXPECT_EQ(Stream(ids, {"light", "and darkness!"}, &matched, nullptr, late), "light and ");
  EXPECT_EQ(matched, "light");
  late.min_tokens = first_end - 1;  // the first one counts again
  EXPECT_EQ(Stream(ids, {"light"}, nullptr, nullptr, late), "");
  late.min_tokens = static_cast<int32_t>(ids.size());  // none counts
  EXPECT_EQ(Stream(ids, {"light"}, nullptr, nullptr, late), tokenizer_->Decode(ids));
}

TEST_F(SequenceTextTest, SpecialTokensShowOnlyWhenNotSkipped) {
  const TokenId eot = 2047;  // <|end_of_text|>, special in the demo tokenizer
  ASSERT_TRUE(tokenizer_->IsSpecial(eot));
  std::vector<TokenId> ids = tokenizer_->Encode("the end");
  ids.push_back(eot);
  EXPECT_EQ(Stream(ids, {}), "the end");
  TextOptions keep;
  keep.skip_special_tokens = false;
  EXPECT_EQ(Stream(ids, {}, nullptr, nullptr, keep), "the end<|end_of_text|>");
  // A stop string can match a special token's text when it is shown.
  std::string matched;
  EXPECT_EQ(Stream(ids, {"<|end"}, &matched, nullptr, keep), "the end");
}

// The random check again with include_stop and min_tokens: the stream is the
// decode cut at the end of the first occurrence of a stop that ends in the
// text of a token past the first min_tokens.
TEST_F(SequenceTextTest, RandomTextsStopsAndOptions) {
  const std::string corpus =
      "In the beginning God created the heaven and the earth. And the earth was without "
      "form, and void; 我很感谢你的热情 and darkness was upon the face of the deep. ÄÖÜ ß";
  std::mt19937 rng(11);
  for (int iter = 0; iter < 400; ++iter) {
    const size_t a = rng() % corpus.size(), len = 1 + rng() % 80;
    const std::vector<TokenId> ids = tokenizer_->Encode(corpus.substr(a, len));
    // Where each token's text ends in the streamed decode.
    std::vector<size_t> ends;
    SequenceText plain(*tokenizer_, std::span<const std::string>{});
    std::string decoded;
    for (TokenId id : ids) {
      decoded += plain.Append(id);
      ends.push_back(decoded.size());
    }
    decoded += plain.Finish();
    if (decoded.empty()) continue;
    // 1-3 stop strings cut from the text (byte ranges: not always whole
    // characters), of different lengths.
    std::vector<std::string> stops;
    for (size_t n = 1 + rng() % 3; stops.size() < n;) {
      stops.push_back(decoded.substr(rng() % decoded.size(), 1 + rng() % 8));
    }
    TextOptions options;
    options.include_stop = rng() % 2 == 0;
    options.min_tokens = static_cast<int32_t>(rng() % (ids.size() + 2));
    // The winner: the match ending in the earliest token past min_tokens;
    // within that token the earliest start, then the first stop listed.
    struct Match { size_t token, at, stop; };
    std::optional<Match> win;
    for (size_t k = 0; k < stops.size(); ++k) {
      const std::string& stop = stops[k];
      for (size_t at = decoded.find(stop); at != std::string::npos; at = decoded.find(stop, at + 1)) {
        const size_t token =
            std::lower_bound(ends.begin(), ends.end(), at + stop.size()) - ends.begin();
        if (token >= ends.size() || static_cast<int32_t>(token) + 1 <= options.min_tokens) continue;
        const Match m{token, at, k};
        if (!win || std::tie(m.token, m.at, m.stop) < std::tie(win->token, win->at, win->stop)) {
          win = m;
        }
      }
    }
    std::string want = decoded, want_stop;
    if (win) {
      want_stop = stops[win->stop];
      want = decoded.substr(0, options.include_stop ? win->at + want_stop.size() : win->at);
    }
    std::string matched;
    std::string why = "text '" + decoded + "' min_tokens " + std::to_string(options.min_tokens) +
                      " include " + std::to_string(options.include_stop) + " stops";
    for (const std::string& s : stops) why += " '" + s + "'";
    EXPECT_EQ(Stream(ids, stops, &matched, nullptr, options), want) << why;
    EXPECT_EQ(matched, want_stop) << why;
  }
}

// Text is held back by characters, not bytes: a one-character stop string
// holds nothing back however many bytes it has; a three-character one holds
// back two characters.
TEST_F(SequenceTextTest, HoldsBackCharactersNotBytes) {
  const std::vector<TokenId> ids = tokenizer_->Encode("And the evening and the morning");
  for (const auto& [stop, held] : {std::pair<std::string, size_t>{"€", 0},
                                   std::pair<std::string, size_t>{"a€b", 2}}) {
    SequenceText text(*tokenizer_, std::vector<std::string>{stop});
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) {
      out += text.Append(ids[i]);
      const std::string so_far = tokenizer_->Decode(std::span(ids).first(i + 1));
      EXPECT_EQ(out, so_far.substr(0, so_far.size() - std::min(held, so_far.size())))
          << "stop '" << stop << "' after token " << i;
    }
  }
}

}  // namespace
}  // namespace folio
