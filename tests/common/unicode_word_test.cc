#include "common/unicode_word.h"

#include <string>

#include "gtest/gtest.h"

namespace folio {
namespace {

// Rust's Unicode \w: letters of any script, marks, decimal digits, '_' and
// the joiners; not punctuation, symbols or spaces.
TEST(UnicodeWordTest, WordCharactersAtEitherEnd) {
  for (const char* word : {"a", "Z", "9", "_", "é", "中", "٣", "\u0301", "Ⅰ", "\u200D"}) {
    EXPECT_TRUE(StartsWithWordChar(std::string(word) + "!")) << word;
    EXPECT_TRUE(EndsWithWordChar(std::string("!") + word)) << word;
  }
  for (const char* other : {"!", " ", "，", "…", "\u3000", "\u180E", "🙂", "$"}) {
    EXPECT_FALSE(StartsWithWordChar(std::string(other) + "a")) << other;
    EXPECT_FALSE(EndsWithWordChar(std::string("a") + other)) << other;
  }
  EXPECT_FALSE(StartsWithWordChar(""));
  EXPECT_FALSE(EndsWithWordChar(""));
}

TEST(UnicodeWordTest, WhiteSpaceRunsAtEitherEnd) {
  const std::string s = "\u3000 \tx\u00A0\u2028 ";
  EXPECT_EQ(LeadingWhiteSpaceEnd(s), std::string("\u3000 \t").size());
  EXPECT_EQ(TrailingWhiteSpaceStart(s), std::string("\u3000 \tx").size());
  EXPECT_EQ(LeadingWhiteSpaceEnd("x "), 0u);
  EXPECT_EQ(TrailingWhiteSpaceStart(" x"), 2u);
  EXPECT_EQ(TrailingWhiteSpaceStart("   "), 0u);
  EXPECT_EQ(LeadingWhiteSpaceEnd("\u180E"), 0u);  // not White_Space since Unicode 6.3
  EXPECT_EQ(TrailingWhiteSpaceStart(""), 0u);
}

}  // namespace
}  // namespace folio
