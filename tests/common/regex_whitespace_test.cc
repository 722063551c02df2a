#include "common/regex_whitespace.h"

#include <string>

#include "gtest/gtest.h"

namespace folio {
namespace {

const std::string kWs =
    R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

TEST(SpellOutWhitespaceTest, OutsideAClassBothBecomeClasses) {
  EXPECT_EQ(SpellOutWhitespace(R"(\s+(?!\S)|\s+)"),
            "[" + kWs + "]+(?![^" + kWs + "])|[" + kWs + "]+");
}

TEST(SpellOutWhitespaceTest, InsideAClassWhitespaceIsSplicedIn) {
  EXPECT_EQ(SpellOutWhitespace(R"( ?[^\s\p{L}\p{N}]+)"), " ?[^" + kWs + R"(\p{L}\p{N}]+)");
  EXPECT_EQ(SpellOutWhitespace(R"([]\s])"), "[]" + kWs + "]");    // ']' first is a member
  EXPECT_EQ(SpellOutWhitespace(R"([^]\s])"), "[^]" + kWs + "]");
  EXPECT_EQ(SpellOutWhitespace(R"([[:alpha:]\s]x)"), "[[:alpha:]" + kWs + "]x");
}

TEST(SpellOutWhitespaceTest, EverythingElseStaysAsWritten) {
  for (const char* kept : {R"(\\s)", R"(\Q\s\S\E\d)", R"([\S\d])", R"(\p{N}{1,3}|'s)", "",
                           R"(a\)", R"(\Q\s)"}) {
    EXPECT_EQ(SpellOutWhitespace(kept), kept) << kept;
  }
  EXPECT_EQ(SpellOutWhitespace(R"(\\\s)"), R"(\\[)" + kWs + "]");  // an escaped '\' then \s
}

}  // namespace
}  // namespace folio
