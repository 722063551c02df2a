#include "common/unicode_word.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdint>

#include "common/check.h"

namespace folio {
namespace {

bool IsContinuation(char c) { return (static_cast<uint8_t>(c) & 0xC0) == 0x80; }

// Rust regex's Unicode \w.
constexpr char kWordChar[] = R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])";

// Whether the code point starting at text[pos] is a word character.
bool IsWordCharAt(std::string_view text, size_t pos) {
  static pcre2_code* const word = [] {
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kWordChar), PCRE2_ZERO_TERMINATED,
                                     PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    FOLIO_CHECK(code != nullptr);
    return code;
  }();
  // The one code point as the subject: PCRE2 checks its UTF-8, not the text's.
  size_t len = 1;
  while (pos + len < text.size() && IsContinuation(text[pos + len]) && len < 4) ++len;
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  FOLIO_CHECK(md != nullptr);
  const int rc = pcre2_match(word, reinterpret_cast<PCRE2_SPTR>(text.data() + pos), len, 0,
                             PCRE2_ANCHORED, md, nullptr);
  pcre2_match_data_free(md);
  return rc >= 0;
}

// The code point at text[pos] (a lead byte) and its length.
char32_t Decode(std::string_view text, size_t pos, size_t* len) {
  const auto b = static_cast<uint8_t>(text[pos]);
  *len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  if (pos + *len > text.size()) *len = text.size() - pos;
  char32_t cp = *len == 1 ? b : b & (0x3F >> (*len - 1));
  for (size_t i = 1; i < *len; ++i) cp = (cp << 6) | (static_cast<uint8_t>(text[pos + i]) & 0x3F);
  return cp;
}

// Unicode White_Space: what Rust's \s matches.
bool IsWhiteSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

size_t LastCodePointStart(std::string_view text) {
  size_t pos = text.size() - 1;
  while (pos > 0 && IsContinuation(text[pos])) --pos;
  return pos;
}

}  // namespace

bool EndsWithWordChar(std::string_view text) {
  return !text.empty() && IsWordCharAt(text, LastCodePointStart(text));
}

bool StartsWithWordChar(std::string_view text) { return !text.empty() && IsWordCharAt(text, 0); }

size_t TrailingWhiteSpaceStart(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    const size_t pos = LastCodePointStart(text.substr(0, end));
    size_t len = 0;
    if (!IsWhiteSpace(Decode(text, pos, &len))) break;
    end = pos;
  }
  return end;
}

size_t LeadingWhiteSpaceEnd(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t len = 0;
    if (!IsWhiteSpace(Decode(text, pos, &len))) break;
    pos += len;
  }
  return pos;
}

}  // namespace folio
