// Encoding and decoding with small hand-built tokenizer.json files whose ids
// can be worked out by hand.

#include "common/tokenizer.h"

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace folio {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Not;
using testing_util::AddedToken;
using testing_util::BpeSpec;
using testing_util::json;
using testing_util::LoadBpe;
using testing_util::SplitThenByteLevel;

// Bytes are ids 0..255 (id == byte value); merges get 256, 257, ... in order.
//   256 he  257 ll  258 hell  259 hello  260 " w"  261 or  262 " wor"
//   263 aa  264 bc  265 ab
BpeSpec HelloSpec() {
  BpeSpec spec;
  spec.merges = {{"h", "e"}, {"l", "l"},   {"he", "ll"}, {"hell", "o"}, {" ", "w"},
                 {"o", "r"}, {" w", "or"}, {"a", "a"},   {"b", "c"},    {"a", "b"}};
  return spec;
}

TEST(TokenizerTest, MergesByRankByHand) {
  auto t = LoadBpe(HelloSpec());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->vocab_size(), 266);
  // "hello" merges all the way; " world" stops at " wor" + l + d.
  EXPECT_THAT(t->Encode("hello world"), ElementsAre(259, 262, 'l', 'd'));
  // Same rank: leftmost first. Lower rank wins over position: (b,c) before (a,b).
  EXPECT_THAT(t->Encode("aaa"), ElementsAre(263, 'a'));
  EXPECT_THAT(t->Encode("aaaa"), ElementsAre(263, 263));
  EXPECT_THAT(t->Encode("abc"), ElementsAre('a', 264));
  EXPECT_THAT(t->Encode("ab"), ElementsAre(265));
  // Case matters; partial merges stay partial.
  EXPECT_THAT(t->Encode("Hello"), ElementsAre('H', 'e', 257, 'o'));
  EXPECT_THAT(t->Encode(""), IsEmpty());
  EXPECT_EQ(t->Decode(t->Encode("hello world")), "hello world");
}

TEST(TokenizerTest, MergesAsPairsGiveTheSameIds) {
  BpeSpec spec = HelloSpec();
  spec.merges_as_pairs = true;
  auto t = LoadBpe(spec);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->Encode("hello world"), ElementsAre(259, 262, 'l', 'd'));
}

TEST(TokenizerTest, TokenLookups) {
  BpeSpec spec = HelloSpec();
  spec.added_tokens = {AddedToken(266, "<|endoftext|>")};
  auto t = LoadBpe(spec);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->FindToken("\xC4\xA0wor"), 262);  // "Ġwor": the spelling in tokenizer.json
  EXPECT_EQ(t->FindToken("hello"), 259);
  EXPECT_EQ(t->FindToken("<|endoftext|>"), 266);
  EXPECT_EQ(t->FindToken(" wor"), std::nullopt);  // raw bytes are not a spelling
  EXPECT_EQ(t->FindToken("nope"), std::nullopt);
  EXPECT_EQ(t->TokenBytes(262), " wor");
  EXPECT_EQ(t->TokenBytes('\n'), "\n");
  EXPECT_EQ(t->TokenBytes(0xE6), "\xE6");
  EXPECT_EQ(t->TokenBytes(266), "<|endoftext|>");
  EXPECT_EQ(t->TokenBytes(-1), "");
  EXPECT_EQ(t->TokenBytes(100000), "");
  EXPECT_TRUE(t->IsSpecial(266));
  EXPECT_FALSE(t->IsSpecial(259));
  EXPECT_FALSE(t->IsSpecial(-5));
  EXPECT_EQ(t->bos_token_id(), 266);  // <|endoftext|> is GPT-2's BOS
  EXPECT_THAT(t->Encode("ab", /*add_bos=*/true), ElementsAre(266, 265));
  t->set_bos_token_id(7);
  EXPECT_THAT(t->Encode("ab", /*add_bos=*/true), ElementsAre(7, 265));
}

TEST(TokenizerTest, NoBosWithoutBosLikeToken) {
  auto t = LoadBpe(HelloSpec());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->bos_token_id(), std::nullopt);
  EXPECT_THAT(t->Encode("ab", /*add_bos=*/true), ElementsAre(265));
}

TEST(TokenizerTest, AddedTokensInTheMiddleOfText) {
  BpeSpec spec = HelloSpec();
  spec.added_tokens = {AddedToken(300, "<|endoftext|>"),
                       AddedToken(301, "<|user|>"),
                       AddedToken(302, "[NOTE]", /*special=*/false),
                       AddedToken(303, "<|begin_of_text|>"),
                       AddedToken(304, "<a>"),
                       AddedToken(305, "<a><b>")};
  auto t = LoadBpe(spec);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->vocab_size(), 306);    // max id + 1, holes included
  EXPECT_EQ(t->bos_token_id(), 303);  // <|begin_of_text|> preferred over <|endoftext|>
  const std::string text = "hello<|endoftext|> world<|user|>[NOTE]aa";
  const std::vector<TokenId> ids = t->Encode(text);
  EXPECT_THAT(ids, ElementsAre(259, 300, 262, 'l', 'd', 301, 302, 263));
  EXPECT_EQ(t->Decode(ids, /*skip_special_tokens=*/false), text);
  EXPECT_EQ(t->Decode(ids), "hello world[NOTE]aa");  // non-special added tokens stay
  // Longest match first; adjacent added tokens; added token at both ends.
  EXPECT_THAT(t->Encode("<a><b><a>"), ElementsAre(305, 304));
  EXPECT_THAT(t->Encode("<|user|>ab<|user|>"), ElementsAre(301, 265, 301));
  // Near misses are ordinary text.
  EXPECT_EQ(t->Decode(t->Encode("<|user|")), "<|user|");
  EXPECT_EQ(t->Encode("<|user|").size(), 7u);
  // Holes in the id space decode to nothing.
  EXPECT_EQ(t->Decode(std::vector<TokenId>{259, 290, 262}), "hello wor");
}

TEST(TokenizerTest, AddedTokenStripAndSingleWord) {
  BpeSpec spec = HelloSpec();
  json mask = AddedToken(300, "<mask>");
  mask["lstrip"] = true;
  mask["rstrip"] = true;
  json word = AddedToken(301, "ab", /*special=*/false);
  word["single_word"] = true;
  spec.added_tokens = {mask, word};
  auto t = LoadBpe(spec);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->Encode("aa  <mask>  aa"), ElementsAre(263, 300, 263));
  EXPECT_THAT(t->Encode("x ab y"), ElementsAre('x', ' ', 301, ' ', 'y'));
  EXPECT_THAT(t->Encode("abc"), ElementsAre('a', 264));  // inside a word: ordinary BPE
  // As Hugging Face reads them (Unicode \w and \s): punctuation of any script is
  // no word character, a letter of any script is; any White_Space is stripped.
  EXPECT_THAT(t->Encode("\uFF0Cab\uFF0C"), Contains(301));  // fullwidth commas
  EXPECT_THAT(t->Encode("\u2026ab"), Contains(301));         // an ellipsis
  EXPECT_THAT(t->Encode("\u00E9ab"), Not(Contains(301)));     // é
  EXPECT_THAT(t->Encode("ab\u4E2D"), Not(Contains(301)));     // 中
  EXPECT_THAT(t->Encode("\u3000<mask>\u3000aa"), ElementsAre(300, 263));
}

TEST(TokenizerTest, IgnoreMergesTakesWholePreTokens) {
  BpeSpec spec = HelloSpec();
  spec.extra_vocab = {" world"};  // id 266, not reachable through merges
  spec.pre_tokenizer = SplitThenByteLevel(testing_util::kLlama3Pattern);
  spec.ignore_merges = true;
  auto t = LoadBpe(spec);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->Encode("hello world"), ElementsAre(259, 266));
  EXPECT_THAT(t->Encode("hello worlds"), ElementsAre(259, 262, 'l', 'd', 's'));
  spec.ignore_merges = false;
  auto u = LoadBpe(spec);
  ASSERT_NE(u, nullptr);
  EXPECT_THAT(u->Encode("hello world"), ElementsAre(259, 262, 'l', 'd'));
}

// Expected splits come from PCRE2 (tools/bpe_tokenizer.py pcre2_split) and were
// checked by hand against the regex alternatives.
TEST(PreTokenizerTest, Gpt2Regex) {
  auto t = LoadBpe(BpeSpec{});
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->PreTokenize("I'm here, don't   go\n\nnow 42x"),
              ElementsAre("I", "'m", " here", ",", " don", "'t", "  ", " go", "\n", "\n", "now",
                          " 42", "x"));
  EXPECT_THAT(t->PreTokenize("Hello, world! It's 2024.\tTabs  and\r\n\r\nnewlines"),
              ElementsAre("Hello", ",", " world", "!", " It", "'s", " 2024", ".", "\t", "Tabs", " ",
                          " and", "\r\n\r", "\n", "newlines"));
  EXPECT_THAT(t->PreTokenize("I'M HERE'S 12345 $hello ...\n\n  x"),
              ElementsAre("I", "'", "M", " HERE", "'", "S", " 12345", " $", "hello", " ...",
                          "\n\n ", " x"));
  EXPECT_THAT(t->PreTokenize("we've 3.14159 é你好 🙂!!"),
              ElementsAre("we", "'ve", " 3", ".", "14159", " é你好", " 🙂!!"));
  EXPECT_THAT(t->PreTokenize("trailing   "), ElementsAre("trailing", "   "));
}

TEST(PreTokenizerTest, Llama3Regex) {
  BpeSpec spec;
  spec.pre_tokenizer = SplitThenByteLevel(testing_util::kLlama3Pattern);
  auto t = LoadBpe(spec);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->PreTokenize("Hello, world! It's 2024.\tTabs  and\r\n\r\nnewlines"),
              ElementsAre("Hello", ",", " world", "!", " It", "'s", " ", "202", "4", ".", "\tTabs",
                          " ", " and", "\r\n\r\n", "newlines"));
  EXPECT_THAT(t->PreTokenize("I'M HERE'S 12345 $hello ...\n\n  x"),
              ElementsAre("I", "'M", " HERE", "'S", " ", "123", "45", " $", "hello", " ...\n\n",
                          " ", " x"));
  EXPECT_THAT(t->PreTokenize("we've 3.14159 é你好 🙂!!"),
              ElementsAre("we", "'ve", " ", "3", ".", "141", "59", " é你好", " 🙂!!"));
}

// \s is Unicode White_Space, as in Hugging Face's regex engine: U+180E
// MONGOLIAN VOWEL SEPARATOR (a space before Unicode 6.3, PCRE2's \s still
// takes it) is punctuation-like, so two of them are one piece; U+3000 and
// U+0085 are spaces.
TEST(PreTokenizerTest, WhitespaceIsUnicodeWhiteSpace) {
  BpeSpec spec;
  spec.pre_tokenizer = SplitThenByteLevel(testing_util::kLlama3Pattern);
  auto t = LoadBpe(spec);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->PreTokenize("x\u180E\u180Ey"), ElementsAre("x", "\u180E\u180E", "y"));
  EXPECT_THAT(t->PreTokenize("x\u3000\u3000y"), ElementsAre("x", "\u3000", "\u3000y"));
  EXPECT_THAT(t->PreTokenize("x\u0085 "), ElementsAre("x", "\u0085 "));
}

TEST(PreTokenizerTest, Qwen2Regex) {
  BpeSpec spec;
  spec.pre_tokenizer = SplitThenByteLevel(testing_util::kQwen2Pattern);
  auto t = LoadBpe(spec);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->PreTokenize("I'M HERE'S 12345 $hello ...\n\n  x"),
              ElementsAre("I", "'M", " HERE", "'S", " ", "1", "2", "3", "4", "5", " $", "hello",
                          " ...\n\n", " ", " x"));
}

std::vector<std::string> SplitWith(const json& pre_tokenizer, const std::string& text) {
  BpeSpec spec;
  spec.pre_tokenizer = pre_tokenizer;
  auto t = LoadBpe(spec);
  EXPECT_NE(t, nullptr);
  return t ? t->PreTokenize(text) : std::vector<std::string>{};
}

json StringSplit(const std::string& s, const std::string& behavior) {
  return {
      {"type", "Split"}, {"pattern", {{"String", s}}}, {"behavior", behavior}, {"invert", false}};
}

// The examples of the tokenizers documentation for SplitDelimiterBehavior.
TEST(PreTokenizerTest, SplitBehaviors) {
  const std::string text = "the-final--countdown";
  EXPECT_THAT(SplitWith(StringSplit("-", "Removed"), text),
              ElementsAre("the", "final", "countdown"));
  EXPECT_THAT(SplitWith(StringSplit("-", "Isolated"), text),
              ElementsAre("the", "-", "final", "-", "-", "countdown"));
  EXPECT_THAT(SplitWith(StringSplit("-", "MergedWithPrevious"), text),
              ElementsAre("the-", "final-", "-", "countdown"));
  EXPECT_THAT(SplitWith(StringSplit("-", "MergedWithNext"), text),
              ElementsAre("the", "-final", "-", "-countdown"));
  EXPECT_THAT(SplitWith(StringSplit("-", "Contiguous"), text),
              ElementsAre("the", "-", "final", "--", "countdown"));
  // A String pattern is literal, not a regex.
  EXPECT_THAT(SplitWith(StringSplit(".", "Removed"), "a.b-c"), ElementsAre("a", "b-c"));
  // invert: the pattern describes what to keep.
  json inverted = {{"type", "Split"},
                   {"pattern", {{"Regex", R"(\p{L}+)"}}},
                   {"behavior", "Removed"},
                   {"invert", true}};
  EXPECT_THAT(SplitWith(inverted, "ab-cd--e"), ElementsAre("ab", "cd", "e"));
}

TEST(PreTokenizerTest, DigitsByteLevelPrefixSpaceAndNone) {
  json digits = {{"type", "Sequence"},
                 {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}}}};
  EXPECT_THAT(SplitWith(digits, "abc123"), ElementsAre("abc", "1", "2", "3"));
  digits["pretokenizers"][0]["individual_digits"] = false;
  EXPECT_THAT(SplitWith(digits, "abc123d4"), ElementsAre("abc", "123", "d", "4"));
  // ByteLevel without use_regex defaults to the GPT-2 regex.
  EXPECT_THAT(SplitWith({{"type", "ByteLevel"}, {"add_prefix_space", true}}, "hello world"),
              ElementsAre(" hello", " world"));
  EXPECT_THAT(SplitWith({{"type", "ByteLevel"}, {"add_prefix_space", true}}, " x"),
              ElementsAre(" x"));
  BpeSpec spec;
  json j = testing_util::BpeJson(spec);
  j["pre_tokenizer"] = nullptr;
  auto t = testing_util::LoadJson(j);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->PreTokenize("a b  c"), ElementsAre("a b  c"));
}

// Merges inside multi-byte characters, so tokens cut UTF-8 sequences.
BpeSpec MultiByteSpec() {
  BpeSpec spec = HelloSpec();
  for (const auto& merge : std::vector<std::pair<std::string, std::string>>{
           {"\xE6", "\x88"},      // 266: first two bytes of 我 (E6 88 91)
           {"\xE6\x88", "\x91"},  // 267: 我
           {"\xF0", "\x9F"},      // 268: the start of most emoji
           {"\xF0\x9F", "\x99"},  // 269: 3/4 of 🙂 (F0 9F 99 82)
           {"\xC3", "\xA9"},      // 270: é
           {"\xE4", "\xBD"},      // 271: 2/3 of 你 (E4 BD A0)
           {" ", "\xE4\xBD"}}) {  // 272: a space and 2/3 of 你
    spec.merges.push_back(merge);
  }
  spec.pre_tokenizer = SplitThenByteLevel(testing_util::kLlama3Pattern);
  spec.added_tokens = {AddedToken(400, "<|end_of_text|>")};
  return spec;
}

TEST(TokenizerTest, RoundTrips) {
  for (const BpeSpec& spec : {HelloSpec(), MultiByteSpec()}) {
    auto t = LoadBpe(spec);
    ASSERT_NE(t, nullptr);
    for (const std::string text : {
             "The quick brown fox jumps over the lazy dog. It's 3:14 PM!",
             "Ça été très difficile, naïve façade, Ærøskøbing, señor",
             "我很感谢你的热情",
             "emoji: 🙂👍🏽 👨‍👩‍👧 flags 🇫🇷 and ✨",
             " \t\n  \r\n\n   mixed   whitespace \u00a0\u3000 end  ",
             "Привет мир; مرحبا بالعالم; नमस्ते",
             "hello world<|end_of_text|>我很感谢你的热情",
             "",
         }) {
      const std::vector<TokenId> ids = t->Encode(text);
      EXPECT_EQ(t->Decode(ids, /*skip_special_tokens=*/false), text);
      for (TokenId id : ids) {
        EXPECT_GE(id, 0);
        EXPECT_LT(id, t->vocab_size());
      }
    }
  }
}

TEST(TokenizerTest, MultiByteMerges) {
  auto t = LoadBpe(MultiByteSpec());
  ASSERT_NE(t, nullptr);
  const TokenId wo = *t->FindToken(testing_util::Spell("\xE6\x88\x91"));
  const TokenId e_acute = *t->FindToken(testing_util::Spell("\xC3\xA9"));
  const TokenId e4bd = *t->FindToken(testing_util::Spell("\xE4\xBD"));
  EXPECT_THAT(t->Encode("我"), ElementsAre(wo));
  EXPECT_THAT(t->Encode("é"), ElementsAre(e_acute));
  EXPECT_THAT(t->Encode("你"), ElementsAre(e4bd, 0xA0));
  EXPECT_THAT(t->Encode("a 你"), ElementsAre('a', 272, 0xA0));
  EXPECT_THAT(t->Encode("🙂"), ElementsAre(269, 0x82));
  EXPECT_THAT(t->Encode("<|end_of_text|>"), ElementsAre(400));
}

TEST(TokenizerTest, InvalidUtf8InputBecomesReplacementCharacters) {
  auto t = LoadBpe(HelloSpec());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Decode(t->Encode("ab\xFF"
                                "cd\xE6\x88")),
            "ab\uFFFDcd\uFFFD");
  // Decoding lone bytes is lossy the same way.
  EXPECT_EQ(t->Decode(std::vector<TokenId>{'a', 0xE6, 0x88, 'b', 0xFF}), "a\uFFFDb\uFFFD");
}

TEST(TokenizerTest, LongInputsAreFast) {
  auto t = LoadBpe(MultiByteSpec());
  ASSERT_NE(t, nullptr);
  const auto start = std::chrono::steady_clock::now();
  // One 200,000-byte pre-token: a quadratic merge loop would take minutes.
  const std::string as(200000, 'a');
  const std::vector<TokenId> ids = t->Encode(as);
  ASSERT_EQ(ids.size(), 100000u);
  EXPECT_EQ(ids.front(), 263);
  EXPECT_EQ(ids.back(), 263);
  std::string chinese;
  for (int i = 0; i < 5000; ++i) chinese += "我很感谢你的热情";
  EXPECT_EQ(t->Decode(t->Encode(chinese)), chinese);
  std::string prose;
  for (int i = 0; i < 2000; ++i) prose += "hello world, it's a lovely day in 2024! ";
  EXPECT_EQ(t->Decode(t->Encode(prose)), prose);
  // Long runs that make regexes backtrack: whitespace, punctuation, digits.
  for (const std::string& run : {std::string(100000, ' ') + "x", std::string(100000, '!'),
                                std::string(100000, '7'), std::string(50000, '\n') + " \t"}) {
    EXPECT_EQ(t->Decode(t->Encode(run)), run);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 10.0);
  std::printf("encode+decode of ~1 MB of long inputs: %.3f s\n", seconds);
}

TEST(TokenizerTest, ConstMethodsAreSafeToShareAcrossThreads) {
  auto t = LoadBpe(MultiByteSpec());
  ASSERT_NE(t, nullptr);
  const std::string text = "hello world, 我很感谢你的热情 🙂 aaab<|end_of_text|> it's 42";
  const std::vector<TokenId> expected = t->Encode(text);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < 500; ++i) {
        const std::vector<TokenId> ids = t->Encode(text);
        if (ids != expected || t->Decode(ids, false) != text) ++mismatches[k];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_THAT(mismatches, ElementsAre(0, 0, 0, 0));
}

}  // namespace
}  // namespace folio
