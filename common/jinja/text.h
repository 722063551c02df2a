#ifndef FOLIO_COMMON_JINJA_TEXT_H_
#define FOLIO_COMMON_JINJA_TEXT_H_

// Python str semantics over UTF-8 bytes: strings are indexed, sliced and
// counted by code point, and the character classes follow Python's str
// methods. A byte that is not valid UTF-8 decodes to U+DC80..U+DCFF (like
// Python's surrogateescape) and encodes back to the same byte, so no input
// is ever altered by a round trip.
//
// Case mapping and the alpha/digit classes cover ASCII, Latin-1, Latin
// Extended-A and Additional, Greek, Cyrillic, Armenian and the full-width
// forms (plus the common CJK/Hangul/kana letter ranges for isalpha); other
// scripts are left as they are. Whitespace is Python's str.isspace() set.

#include <cstdint>
#include <string>
#include <string_view>

namespace folio::jinja::text {

// Decodes the code point at s[*pos] and advances *pos.
char32_t Decode(std::string_view s, size_t* pos);
void Append(std::string* out, char32_t cp);
std::u32string ToU32(std::string_view s);
std::string FromU32(std::u32string_view s);
bool IsAscii(std::string_view s);
// Code points in s.
size_t Length(std::string_view s);

bool IsSpace(char32_t cp);       // str.isspace / split() / strip()
bool IsAlpha(char32_t cp);
bool IsDigit(char32_t cp);       // str.isdigit
bool IsDecimal(char32_t cp);     // str.isdecimal
bool IsAlnum(char32_t cp);
bool IsWord(char32_t cp);        // regex \w
bool IsUpper(char32_t cp);       // cased and uppercase
bool IsLower(char32_t cp);       // cased and lowercase
bool IsPrintable(char32_t cp);   // str.isprintable (for repr)
bool IsLineBreak(char32_t cp);   // str.splitlines boundaries

// Full case mappings appended to out (ß upper-cases to "SS").
void AppendUpper(std::string* out, char32_t cp);
void AppendLower(std::string* out, char32_t cp);
std::string Upper(std::string_view s);
std::string Lower(std::string_view s);

}  // namespace folio::jinja::text

#endif  // FOLIO_COMMON_JINJA_TEXT_H_
