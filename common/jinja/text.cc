#include "common/jinja/text.h"

namespace folio::jinja::text {
namespace {

struct Range {
  char32_t lo, hi;
};

bool InRanges(char32_t cp, const Range* ranges, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (cp < ranges[i].lo) return false;  // sorted
    if (cp <= ranges[i].hi) return true;
  }
  return false;
}

// Blocks where upper and lower case alternate: the even code point is the
// upper case one when `even_upper`.
struct PairBlock {
  char32_t lo, hi;
  bool even_upper;
};
constexpr PairBlock kPairBlocks[] = {
    {0x0100, 0x012F, true}, {0x0132, 0x0137, true}, {0x0139, 0x0148, false},
    {0x014A, 0x0177, true}, {0x0179, 0x017E, false}, {0x0460, 0x0481, true},
    {0x048A, 0x04BF, true}, {0x04C1, 0x04CE, false}, {0x04D0, 0x052F, true},
    {0x1E00, 0x1E95, true}, {0x1EA0, 0x1EFF, true},
};

// Blocks where lower = upper + delta.
struct ShiftBlock {
  char32_t lo, hi;  // upper-case range
  char32_t delta;
};
constexpr ShiftBlock kShiftBlocks[] = {
    {0x0041, 0x005A, 0x20},  {0x00C0, 0x00D6, 0x20},  {0x00D8, 0x00DE, 0x20},
    {0x0388, 0x038A, 0x25},  {0x038E, 0x038F, 0x3F},  {0x0391, 0x03A1, 0x20},
    {0x03A3, 0x03AB, 0x20},  {0x0400, 0x040F, 0x50},  {0x0410, 0x042F, 0x20},
    {0x0531, 0x0556, 0x30},  {0xFF21, 0xFF3A, 0x20},
};

// Lower-case partner, or cp itself.
char32_t SimpleLower(char32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 0x20 : cp;
  for (const ShiftBlock& b : kShiftBlocks) {
    if (cp >= b.lo && cp <= b.hi) return cp + b.delta;
  }
  for (const PairBlock& b : kPairBlocks) {
    if (cp >= b.lo && cp <= b.hi) {
      bool is_upper = ((cp % 2) == 0) == b.even_upper;
      return is_upper ? cp + 1 : cp;
    }
  }
  switch (cp) {
    case 0x0178: return 0x00FF;
    case 0x0386: return 0x03AC;
    case 0x038C: return 0x03CC;
    default: return cp;
  }
}

// Upper-case partner, or cp itself (single code point mappings only).
char32_t SimpleUpper(char32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 0x20 : cp;
  for (const ShiftBlock& b : kShiftBlocks) {
    if (cp >= b.lo + b.delta && cp <= b.hi + b.delta) return cp - b.delta;
  }
  for (const PairBlock& b : kPairBlocks) {
    if (cp >= b.lo && cp <= b.hi) {
      bool is_upper = ((cp % 2) == 0) == b.even_upper;
      return is_upper ? cp : cp - 1;
    }
  }
  switch (cp) {
    case 0x00B5: return 0x039C;
    case 0x00FF: return 0x0178;
    case 0x0131: return 0x0049;
    case 0x017F: return 0x0053;
    case 0x03AC: return 0x0386;
    case 0x03C2: return 0x03A3;
    case 0x03CC: return 0x038C;
    default: return cp;
  }
}

constexpr Range kAlphaRanges[] = {
    {0x0041, 0x005A}, {0x0061, 0x007A}, {0x00AA, 0x00AA}, {0x00B5, 0x00B5},
    {0x00BA, 0x00BA}, {0x00C0, 0x00D6}, {0x00D8, 0x00F6}, {0x00F8, 0x02C1},
    {0x02C6, 0x02D1}, {0x02E0, 0x02E4}, {0x0370, 0x0374}, {0x0376, 0x037D},
    {0x037F, 0x037F}, {0x0386, 0x0386}, {0x0388, 0x03FF}, {0x0400, 0x0481},
    {0x048A, 0x052F}, {0x0531, 0x0556}, {0x0560, 0x0588}, {0x05D0, 0x05EA},
    {0x0620, 0x064A}, {0x0671, 0x06D3}, {0x0904, 0x0939}, {0x0E01, 0x0E30},
    {0x10A0, 0x10FF}, {0x1100, 0x11FF}, {0x1E00, 0x1FBC}, {0x3041, 0x3096},
    {0x30A1, 0x30FA}, {0x3105, 0x312F}, {0x3131, 0x318E}, {0x3400, 0x4DBF},
    {0x4E00, 0x9FFF}, {0xAC00, 0xD7A3}, {0xF900, 0xFAFF}, {0xFF21, 0xFF3A},
    {0xFF41, 0xFF5A}, {0xFF66, 0xFFDC}, {0x20000, 0x2FA1F},
};

constexpr Range kDecimalRanges[] = {
    {0x0030, 0x0039}, {0x0660, 0x0669}, {0x06F0, 0x06F9}, {0x0966, 0x096F},
    {0x09E6, 0x09EF}, {0x0E50, 0x0E59}, {0xFF10, 0xFF19},
};

constexpr Range kSpaceRanges[] = {
    {0x0009, 0x000D}, {0x001C, 0x0020}, {0x0085, 0x0085}, {0x00A0, 0x00A0},
    {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F},
    {0x205F, 0x205F}, {0x3000, 0x3000},
};

// Not printable for repr(): controls, separators other than ' ', format
// characters, surrogates, private use and noncharacters.
constexpr Range kNonPrintableRanges[] = {
    {0x0000, 0x001F},   {0x007F, 0x00A0},   {0x00AD, 0x00AD},   {0x0600, 0x0605},
    {0x061C, 0x061C},   {0x06DD, 0x06DD},   {0x070F, 0x070F},   {0x08E2, 0x08E2},
    {0x1680, 0x1680},   {0x180E, 0x180E},   {0x2000, 0x200F},   {0x2028, 0x202F},
    {0x205F, 0x2064},   {0x2066, 0x206F},   {0x3000, 0x3000},   {0xD800, 0xF8FF},
    {0xFEFF, 0xFEFF},   {0xFFF9, 0xFFFB},   {0xFFFE, 0xFFFF},   {0x110BD, 0x110BD},
    {0x110CD, 0x110CD}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0001, 0xE0001},
    {0xE0020, 0xE007F}, {0xF0000, 0x10FFFF},
};

}  // namespace

char32_t Decode(std::string_view s, size_t* pos) {
  size_t i = *pos;
  unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    *pos = i + 1;
    return c;
  }
  int len = 0;
  char32_t cp = 0;
  char32_t min = 0;
  if ((c & 0xE0) == 0xC0) {
    len = 2, cp = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, cp = c & 0x0F, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, cp = c & 0x07, min = 0x10000;
  }
  if (len == 0 || i + len > s.size()) {
    *pos = i + 1;
    return 0xDC00 + c;
  }
  for (int k = 1; k < len; ++k) {
    unsigned char cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) {
      *pos = i + 1;
      return 0xDC00 + c;
    }
    cp = (cp << 6) | (cc & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    *pos = i + 1;
    return 0xDC00 + c;
  }
  *pos = i + len;
  return cp;
}

void Append(std::string* out, char32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp >= 0xDC80 && cp <= 0xDCFF) {
    out->push_back(static_cast<char>(cp - 0xDC00));  // an undecodable byte, restored
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::u32string ToU32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) out.push_back(Decode(s, &pos));
  return out;
}

std::string FromU32(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) Append(&out, cp);
  return out;
}

bool IsAscii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

size_t Length(std::string_view s) {
  size_t n = 0;
  size_t pos = 0;
  while (pos < s.size()) {
    if (static_cast<unsigned char>(s[pos]) < 0x80) {
      ++pos;
    } else {
      Decode(s, &pos);
    }
    ++n;
  }
  return n;
}

bool IsSpace(char32_t cp) {
  return InRanges(cp, kSpaceRanges, std::size(kSpaceRanges));
}

bool IsAlpha(char32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  if (cp == 0x00D7 || cp == 0x00F7 || cp == 0x0387 || cp == 0x03F6) return false;
  return InRanges(cp, kAlphaRanges, std::size(kAlphaRanges));
}

bool IsDecimal(char32_t cp) {
  return InRanges(cp, kDecimalRanges, std::size(kDecimalRanges));
}

bool IsDigit(char32_t cp) {
  // decimal digits plus the superscript, subscript and circled ones
  return IsDecimal(cp) || cp == 0xB2 || cp == 0xB3 || cp == 0xB9 || cp == 0x2070 ||
         (cp >= 0x2074 && cp <= 0x2079) || (cp >= 0x2080 && cp <= 0x2089) || (cp >= 0x2460 && cp <= 0x2468);
}

bool IsAlnum(char32_t cp) { return IsAlpha(cp) || IsDigit(cp); }

bool IsWord(char32_t cp) { return cp == '_' || IsAlnum(cp); }

bool IsUpper(char32_t cp) { return SimpleLower(cp) != cp; }

bool IsLower(char32_t cp) { return SimpleUpper(cp) != cp || cp == 0x00DF; }

bool IsPrintable(char32_t cp) {
  if (cp >= 0x20 && cp < 0x7F) return true;
  return !InRanges(cp, kNonPrintableRanges, std::size(kNonPrintableRanges));
}

bool IsLineBreak(char32_t cp) {
  return (cp >= 0x0A && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1E) || cp == 0x85 || cp == 0x2028 ||
         cp == 0x2029;
}

void AppendUpper(std::string* out, char32_t cp) {
  if (cp == 0x00DF) {
    out->append("SS");
    return;
  }
  Append(out, SimpleUpper(cp));
}

void AppendLower(std::string* out, char32_t cp) {
  if (cp == 0x0130) {
    out->append("i\xCC\x87");  // i + combining dot above, as Python does
    return;
  }
  Append(out, SimpleLower(cp));
}

std::string Upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) AppendUpper(&out, Decode(s, &pos));
  return out;
}

std::string Lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) AppendLower(&out, Decode(s, &pos));
  return out;
}

}  // namespace folio::jinja::text
