// Streaming detokenization: deltas are always valid UTF-8 and concatenate to
// the full decode, for real text and for random (often broken) token streams.

#include "common/incremental_detokenizer.h"

#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace folio {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::AddedToken;
using testing_util::BpeSpec;

// An independent UTF-8 validator (decodes and range-checks every code point).
bool ValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    int n;
    char32_t cp;
    if (b < 0x80) {
      n = 0, cp = b;
    } else if ((b & 0xE0) == 0xC0) {
      n = 1, cp = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
      n = 2, cp = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
      n = 3, cp = b & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;  // truncated
    for (int k = 1; k <= n; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    static constexpr char32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

TEST(ValidUtf8Test, TheOracleItself) {
  EXPECT_TRUE(ValidUtf8("我很感谢你的热情 🙂 é a"));
  EXPECT_FALSE(ValidUtf8("\xE6\x88"));
  EXPECT_FALSE(ValidUtf8("\xC0\xAF"));
  EXPECT_FALSE(ValidUtf8("\xED\xA0\x80"));
  EXPECT_FALSE(ValidUtf8("\x80"));
}

// Merges that cut multi-byte characters, and specials.
BpeSpec CuttingSpec() {
  BpeSpec spec;
  spec.merges = {{"\xE6", "\x88"},     {"\xF0", "\x9F"}, {"\xF0\x9F", "\x99"},
                 {"\xE6\x88", "\x91"}, {"\xC3", "\xA9"}, {" ", "\xE4"},
                 {"h", "e"},           {"l", "l"},       {"he", "ll"}};
  spec.pre_tokenizer = testing_util::SplitThenByteLevel(testing_util::kLlama3Pattern);
  spec.added_tokens = {AddedToken(300, "<|begin_of_text|>"), AddedToken(301, "<|eot|>"),
                       AddedToken(302, "<tool>", /*special=*/false)};
  return spec;
}

std::vector<std::string> Stream(const Tokenizer& t, const std::vector<TokenId>& ids,
                                bool skip_special, std::string* all) {
  IncrementalDetokenizer detok(t, skip_special);
  std::vector<std::string> deltas;
  for (TokenId id : ids) {
    deltas.push_back(detok.Append(id));
    EXPECT_LE(detok.pending_bytes(), 3u);
  }
  deltas.push_back(detok.Flush());
  EXPECT_EQ(detok.pending_bytes(), 0u);
  all->clear();
  for (const std::string& d : deltas) *all += d;
  return deltas;
}

TEST(IncrementalDetokenizerTest, ChineseOneBytePerToken) {
  auto t = testing_util::LoadBpe(BpeSpec{});  // no merges: one token per byte
  ASSERT_NE(t, nullptr);
  const std::string text = "我很感谢你的热情";
  const std::vector<TokenId> ids = t->Encode(text);
  ASSERT_EQ(ids.size(), 24u);
  std::string all;
  const std::vector<std::string> deltas = Stream(*t, ids, true, &all);
  EXPECT_EQ(all, text);
  const char* chars[] = {"我", "很", "感", "谢", "你", "的", "热", "情"};
  for (int i = 0; i < 24; ++i) EXPECT_EQ(deltas[i], i % 3 == 2 ? chars[i / 3] : "") << i;
  EXPECT_EQ(deltas[24], "");
}

TEST(IncrementalDetokenizerTest, EmojiSplitAcrossTokens) {
  auto t = testing_util::LoadBpe(CuttingSpec());
  ASSERT_NE(t, nullptr);
  const std::vector<TokenId> ids = t->Encode("a🙂");  // a, [F0 9F 99], [82]
  ASSERT_EQ(ids.size(), 3u);
  std::string all;
  EXPECT_THAT(Stream(*t, ids, true, &all), ElementsAre("a", "", "🙂", ""));
  // 👍🏽 is two 4-byte code points, each cut after F0 9F.
  const std::vector<TokenId> thumbs = t->Encode("👍🏽");
  EXPECT_EQ(thumbs.size(), 6u);
  EXPECT_THAT(Stream(*t, thumbs, true, &all), ElementsAre("", "", "👍", "", "", "🏽", ""));
}

TEST(IncrementalDetokenizerTest, SpecialTokenInsideACharacter) {
  auto t = testing_util::LoadBpe(CuttingSpec());
  ASSERT_NE(t, nullptr);
  const TokenId e6 = 0xE6, x88 = 0x88, x91 = 0x91;
  const std::vector<TokenId> ids = {e6, 301, x88, x91, 302};
  std::string all;
  // Skipped specials vanish, so the character's bytes join up.
  EXPECT_THAT(Stream(*t, ids, true, &all), ElementsAre("", "", "", "我", "<tool>", ""));
  EXPECT_EQ(all, t->Decode(ids, true));
  // Kept, they break it: each broken part becomes U+FFFD, exactly as Decode says.
  Stream(*t, ids, false, &all);
  EXPECT_EQ(all, "\uFFFD<|eot|>\uFFFD\uFFFD<tool>");
  EXPECT_EQ(all, t->Decode(ids, false));
}

TEST(IncrementalDetokenizerTest, BrokenBytesAreReplacedAsSoonAsTheyAreFinal) {
  auto t = testing_util::LoadBpe(CuttingSpec());
  ASSERT_NE(t, nullptr);
  IncrementalDetokenizer detok(*t);
  EXPECT_EQ(detok.Append(0xE6), "");
  EXPECT_EQ(detok.Append('a'),
            "\uFFFD"
            "a");  // E6 'a' can never become valid
  EXPECT_EQ(detok.Append(0xFF), "\uFFFD");
  EXPECT_EQ(detok.Append(0xF0), "");
  EXPECT_EQ(detok.Append(0x9F), "");
  EXPECT_EQ(detok.Flush(), "\uFFFD");  // the end cuts F0 9F off: one U+FFFD
  // Reusable after Flush.
  EXPECT_EQ(detok.Append(0xC3), "");
  EXPECT_EQ(detok.Append(0xA9), "é");
  EXPECT_EQ(detok.Flush(), "");
  EXPECT_EQ(detok.Append(-1), "");  // unknown ids add nothing
  EXPECT_EQ(detok.Append(5000), "");
}

TEST(IncrementalDetokenizerTest, RealTextStreamsExactly) {
  auto t = testing_util::LoadBpe(CuttingSpec());
  ASSERT_NE(t, nullptr);
  for (const std::string text :
       {"我很感谢你的热情", "hello 你好, café 🙂👍🏽!",
        "<|begin_of_text|>我<|eot|>🙂 e\u0301", " \t\n mixed \r\n whitespace  ",
        "Ærøskøbing → naïve — 👨‍👩‍👧"}) {
    const std::vector<TokenId> ids = t->Encode(text);
    std::string all;
    for (const std::string& d : Stream(*t, ids, /*skip_special=*/false, &all)) {
      EXPECT_TRUE(ValidUtf8(d));
      EXPECT_THAT(d, Not(HasSubstr("\uFFFD")));  // nothing broken in real text
    }
    EXPECT_EQ(all, text);
    Stream(*t, ids, /*skip_special=*/true, &all);
    EXPECT_EQ(all, t->Decode(ids));
  }
}

TEST(IncrementalDetokenizerTest, RandomStreamsMatchFullDecode) {
  auto t = testing_util::LoadBpe(CuttingSpec());
  ASSERT_NE(t, nullptr);
  std::mt19937 rng(20240917);
  // Mostly ids that cut characters (continuation and lead bytes, merged
  // prefixes), some ASCII, specials, and ids outside the vocabulary.
  std::vector<TokenId> pool;
  for (TokenId id = 0x80; id < 0x100; ++id) pool.push_back(id);
  for (TokenId id = 256; id < t->vocab_size(); ++id) pool.push_back(id);
  for (const char* s : {"a", " ", "\n"}) pool.push_back(static_cast<unsigned char>(s[0]));
  for (TokenId id : {-1, 299, 303, 100000}) pool.push_back(id);
  int checked = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<TokenId> ids(1 + rng() % 40);
    for (TokenId& id : ids) id = pool[rng() % pool.size()];
    for (bool skip : {true, false}) {
      std::string all;
      for (const std::string& d : Stream(*t, ids, skip, &all)) {
        ASSERT_TRUE(ValidUtf8(d)) << "trial " << trial;
      }
      ASSERT_EQ(all, t->Decode(ids, skip)) << "trial " << trial;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 6000);
}

TEST(IncrementalDetokenizerTest, RandomTextStreamsWithoutReplacement) {
  auto t = testing_util::LoadBpe(CuttingSpec());
  ASSERT_NE(t, nullptr);
  const std::vector<std::string> alphabet = {
      "我", "很", "感", "谢", "你", "的", "热", "情", "🙂", "👍", "🏽", "é",      "ø",
      "Ж",  "a",  "h",  "e",  "l",  " ",  "\n", "\t", "'s",   "!", "1",    "<|eot|>"};
  std::mt19937 rng(11);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    for (int n = 1 + rng() % 30; n > 0; --n) text += alphabet[rng() % alphabet.size()];
    const std::vector<TokenId> ids = t->Encode(text);
    std::string all;
    for (const std::string& d : Stream(*t, ids, /*skip_special=*/false, &all)) {
      ASSERT_TRUE(ValidUtf8(d)) << text;
      ASSERT_THAT(d, Not(HasSubstr("\uFFFD"))) << text;
    }
    ASSERT_EQ(all, text);
  }
}

}  // namespace
}  // namespace folio
