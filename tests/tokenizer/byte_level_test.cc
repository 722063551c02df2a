// The byte-level map and the UTF-8 helpers, against known values.

#include "common/byte_level.h"

#include <set>
#include <string>

#include "gtest/gtest.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace folio {
namespace {

TEST(ByteLevelTest, KnownImages) {
  EXPECT_EQ(ByteToCodePoint('!'), U'!');
  EXPECT_EQ(ByteToCodePoint('~'), U'~');
  EXPECT_EQ(ByteToCodePoint(0x00), U'\u0100');  // Ā
  EXPECT_EQ(ByteToCodePoint(' '), U'\u0120');   // Ġ
  EXPECT_EQ(ByteToCodePoint('\n'), U'\u010A');  // Ċ
  EXPECT_EQ(ByteToCodePoint(0x7F), U'\u0121');
  EXPECT_EQ(ByteToCodePoint(0xA0), U'\u0142');
  EXPECT_EQ(ByteToCodePoint(0xAD), U'\u0143');  // the last one
  EXPECT_EQ(ByteToCodePoint(0xE9), U'\u00E9');  // é keeps its value
  EXPECT_EQ(CodePointToByte(U'\u0120'), ' ');
  EXPECT_EQ(CodePointToByte(U' '), -1);  // a space is not an image
  EXPECT_EQ(CodePointToByte(U'\u0144'), -1);
  EXPECT_EQ(CodePointToByte(U'\u4F60'), -1);
}

TEST(ByteLevelTest, AllBytesRoundTripAndMatchTheIndependentSpelling) {
  std::set<char32_t> images;
  std::string all;
  for (int b = 0; b < 256; ++b) {
    images.insert(ByteToCodePoint(static_cast<uint8_t>(b)));
    EXPECT_EQ(CodePointToByte(ByteToCodePoint(static_cast<uint8_t>(b))), b);
    all.push_back(static_cast<char>(b));
  }
  EXPECT_EQ(images.size(), 256u);
  const std::string spelled = ByteLevelEncode(all);
  EXPECT_EQ(spelled, testing_util::Spell(all));
  std::string back;
  ASSERT_TRUE(ByteLevelDecode(spelled, &back));
  EXPECT_EQ(back, all);
}

TEST(ByteLevelTest, DecodeRejectsNonImages) {
  std::string out;
  EXPECT_FALSE(ByteLevelDecode("a b", &out));  // raw space
  out.clear();
  EXPECT_FALSE(ByteLevelDecode("\xE4\xBD\xA0", &out));  // 你
  out.clear();
  EXPECT_FALSE(ByteLevelDecode("\xC4", &out));  // truncated UTF-8
  out.clear();
  EXPECT_TRUE(ByteLevelDecode("\xC4\xA0the", &out));  // Ġthe
  EXPECT_EQ(out, " the");
}

TEST(Utf8Test, Validity) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("我很感谢你的热情 🙂 é"));
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));  // U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\x80"));
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));      // overlong
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate U+D800
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xE6\x88"));          // truncated
  EXPECT_FALSE(IsValidUtf8("\xFF"));
}

std::string Lossy(std::string_view bytes, bool final, size_t* used = nullptr) {
  std::string out;
  const size_t n = AppendUtf8Lossy(bytes, final, &out);
  if (used != nullptr) *used = n;
  return out;
}

// Expected values follow the Unicode "maximal subpart" practice, which Rust's
// from_utf8_lossy and Python's errors="replace" both implement.
TEST(Utf8Test, LossyMaximalSubparts) {
  EXPECT_EQ(Lossy("Hello \xF0\x90\x80World", true), "Hello \uFFFDWorld");
  EXPECT_EQ(Lossy("\xF0\x80\x80", true), "\uFFFD\uFFFD\uFFFD");  // F0 80 is never valid
  EXPECT_EQ(Lossy("\xED\xA0\x80", true), "\uFFFD\uFFFD\uFFFD");  // surrogate
  EXPECT_EQ(Lossy("\xC0\xAF", true), "\uFFFD\uFFFD");
  EXPECT_EQ(Lossy("\xE6\x88"
                  "a",
                  true),
            "\uFFFD"
            "a");  // one U+FFFD for E6 88
  EXPECT_EQ(Lossy("\xE6\x88\xE6\x88\x91", true), "\uFFFD我");
  EXPECT_EQ(Lossy("\xFF\xFE", true), "\uFFFD\uFFFD");
  EXPECT_EQ(Lossy("ok 🙂", true), "ok 🙂");
}

TEST(Utf8Test, LossyHoldsBackAnIncompleteTailUnlessFinal) {
  size_t used = 0;
  EXPECT_EQ(Lossy("ab\xE6\x88", false, &used), "ab");
  EXPECT_EQ(used, 2u);
  EXPECT_EQ(Lossy("ab\xE6\x88", true, &used), "ab\uFFFD");
  EXPECT_EQ(used, 4u);
  EXPECT_EQ(Lossy("\xF0\x9F\x99", false, &used), "");
  EXPECT_EQ(used, 0u);
  // An invalid tail is final already: it cannot become valid.
  EXPECT_EQ(Lossy("a\xE6\x41", false, &used), "a\uFFFDA");
  EXPECT_EQ(used, 3u);
  EXPECT_EQ(Lossy("a\xF5", false, &used), "a\uFFFD");
  EXPECT_EQ(used, 2u);
  EXPECT_EQ(Lossy("\xF0\x80", false, &used), "\uFFFD\uFFFD");  // F0 80 can never complete
  EXPECT_EQ(used, 2u);
}

}  // namespace
}  // namespace folio
