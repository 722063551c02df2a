// vLLM's bad_words on the demo model's tokenizer: which token sequences a
// word becomes (common/bad_words.h), and which next token each bans.
#include "common/bad_words.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace folio {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kDemoDir = std::string(FOLIO_SOURCE_DIR) + "/models/folio-demo";

class BadWordsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = Tokenizer::LoadFromDirectory(kDemoDir);
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = std::move(*t);
  }
  std::vector<TokenId> Encode(const std::string& text) const {
    return tokenizer_->EncodePrompt(text, /*add_special_tokens=*/false);
  }
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(BadWordsTest, EachWordAsItStartsTheTextAndAfterASpace) {
  const std::vector<std::string> words = {"LORD", "  and", "unto them"};
  absl::StatusOr<std::vector<std::vector<TokenId>>> got =
      BadWordsTokenIds(*tokenizer_, words, "bad_words");
  ASSERT_TRUE(got.ok()) << got.status();
  // vLLM's rule, word by word: the word (leading spaces stripped), then " " +
  // word when that starts with another token and is as long.
  std::vector<std::vector<TokenId>> want;
  for (std::string w : {"LORD", "and", "unto them"}) {
    const std::vector<TokenId> plain = Encode(w), spaced = Encode(" " + w);
    want.push_back(plain);
    if (spaced.front() != plain.front() && spaced.size() == plain.size()) want.push_back(spaced);
  }
  EXPECT_EQ(*got, want);
  // "and" and " and" are one token each: both are in. " LORD" (one token)
  // is shorter than "LORD" (two), so as in vLLM only "LORD" is.
  ASSERT_EQ(got->size(), 4u);
  EXPECT_EQ((*got)[0], Encode("LORD"));
  EXPECT_EQ((*got)[1], Encode("and"));
  EXPECT_EQ((*got)[2], Encode(" and"));
  EXPECT_EQ(Encode("and").size(), 1u);
  EXPECT_NE(Encode("and"), Encode(" and"));
}

TEST_F(BadWordsTest, AnEmptyWordIsRefusedByIndex) {
  const std::vector<std::string> words = {"LORD", " \t"};
  absl::StatusOr<std::vector<std::vector<TokenId>>> got =
      BadWordsTokenIds(*tokenizer_, words, "sampling_params.bad_words");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("sampling_params.bad_words[1] must contain a word"));
}

// Leading Unicode spaces go as Python's lstrip() takes them; bytes that are
// not UTF-8 are refused.
TEST_F(BadWordsTest, StripsUnicodeSpacesAndRefusesInvalidUtf8) {
  const std::vector<std::string> spaced = {"\u3000\u00a0\x1f and"};
  absl::StatusOr<std::vector<std::vector<TokenId>>> got =
      BadWordsTokenIds(*tokenizer_, spaced, "bad_words");
  ASSERT_TRUE(got.ok()) << got.status();
  const std::vector<std::string> plain = {"and"};
  EXPECT_EQ(*got, *BadWordsTokenIds(*tokenizer_, plain, "bad_words"));
  const std::vector<std::string> broken = {"an\xff"};
  got = BadWordsTokenIds(*tokenizer_, broken, "bad_words");
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("bad_words[0] is not valid UTF-8"));
}

TEST(BannedByBadWordsTest, LastTokenOnceTheOutputEndsWithTheRest) {
  const std::vector<std::vector<TokenId>> words = {{7}, {1, 2}, {4, 1, 2}, {5, 6}};
  std::vector<TokenId> banned;
  BannedByBadWords(words, std::vector<TokenId>{}, &banned);
  EXPECT_THAT(banned, ElementsAre(7));  // nothing out yet: one-token words only
  banned.clear();
  BannedByBadWords(words, std::vector<TokenId>{4, 1}, &banned);
  EXPECT_THAT(banned, ElementsAre(7, 2, 2));
  banned.clear();
  BannedByBadWords(words, std::vector<TokenId>{1, 5}, &banned);
  EXPECT_THAT(banned, ElementsAre(7, 6));
  banned.clear();
  BannedByBadWords(words, std::vector<TokenId>{3, 1}, &banned);
  EXPECT_THAT(banned, ElementsAre(7, 2));  // [4, 1, 2] needs 4 before the 1
}

}  // namespace
}  // namespace folio
