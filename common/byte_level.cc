#include "common/byte_level.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/regex_whitespace.h"

namespace folio {
namespace {

struct ByteMap {
  std::array<char32_t, 256> to_cp{};
  std::array<int16_t, 324> from_cp{};  // images lie in [0, 0x143]
};

// GPT-2's bytes_to_unicode(): bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF keep
// their value; the remaining bytes, in increasing order, get 256, 257, ...
ByteMap MakeByteMap() {
  ByteMap m;
  m.from_cp.fill(-1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable =
        (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const int cp = printable ? b : next++;
    m.to_cp[b] = static_cast<char32_t>(cp);
    m.from_cp[cp] = static_cast<int16_t>(b);
  }
  FOLIO_CHECK_EQ(next, 0x144);
  return m;
}

const ByteMap& GetByteMap() {
  static const ByteMap map = MakeByteMap();
  return map;
}

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the well-formed UTF-8 sequence at s[i..n), 0 if none starts there.
// Sets *incomplete when the bytes so far are a valid prefix cut off by the end.
// On failure *valid_prefix is the length of the maximal valid prefix (>= 1).
size_t SequenceAt(const uint8_t* s, size_t i, size_t n, bool* incomplete, size_t* valid_prefix) {
  *incomplete = false;
  *valid_prefix = 1;
  const uint8_t b = s[i];
  if (b < 0x80) return 1;
  int need;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    if (b == 0xE0) lo = 0xA0;  // no overlongs
    if (b == 0xED) hi = 0x9F;  // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    if (b == 0xF0) lo = 0x90;  // no overlongs
    if (b == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;  // continuation byte, C0/C1 or F5..FF: never valid
  }
  size_t j = i + 1;
  for (int got = 0; got < need; ++got, ++j) {
    if (j >= n) {
      *incomplete = true;
      *valid_prefix = j - i;
      return 0;
    }
    const uint8_t c = s[j];
    if (c < (got == 0 ? lo : 0x80) || c > (got == 0 ? hi : 0xBF)) {
      *valid_prefix = j - i;
      return 0;
    }
  }
  return j - i;
}

}  // namespace

char32_t ByteToCodePoint(uint8_t b) { return GetByteMap().to_cp[b]; }

int CodePointToByte(char32_t cp) {
  const ByteMap& m = GetByteMap();
  return cp < m.from_cp.size() ? m.from_cp[cp] : -1;
}

void AppendUtf8(char32_t cp, std::string* out) {
  FOLIO_DCHECK(cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF));
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
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

std::string ByteLevelEncode(std::string_view bytes) {
  const ByteMap& m = GetByteMap();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) AppendUtf8(m.to_cp[static_cast<uint8_t>(c)], &out);
  return out;
}

bool ByteLevelDecode(std::string_view text, std::string* out) {
  const ByteMap& m = GetByteMap();
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    bool incomplete;
    size_t prefix;
    const size_t len = SequenceAt(s, i, n, &incomplete, &prefix);
    if (len == 0) return false;
    char32_t cp;
    if (len == 1) {
      cp = s[i];
    } else if (len == 2) {
      cp = ((s[i] & 0x1F) << 6) | (s[i + 1] & 0x3F);
    } else {
      return false;  // every image is below U+0800
    }
    if (cp >= m.from_cp.size() || m.from_cp[cp] < 0) return false;
    out->push_back(static_cast<char>(m.from_cp[cp]));
    i += len;
  }
  return true;
}

bool IsValidUtf8(std::string_view bytes) {
  const auto* s = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    if (s[i] < 0x80) {
      ++i;
      continue;
    }
    bool incomplete;
    size_t prefix;
    const size_t len = SequenceAt(s, i, n, &incomplete, &prefix);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

size_t AppendUtf8Lossy(std::string_view bytes, bool final, std::string* out) {
  const auto* s = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    if (s[i] < 0x80) {  // fast path: a run of ASCII
      size_t j = i + 1;
      while (j < n && s[j] < 0x80) ++j;
      out->append(bytes.data() + i, j - i);
      i = j;
      continue;
    }
    bool incomplete;
    size_t prefix;
    const size_t len = SequenceAt(s, i, n, &incomplete, &prefix);
    if (len > 0) {
      out->append(bytes.data() + i, len);
      i += len;
    } else if (incomplete && !final) {
      return i;  // may still complete: keep it for the next call
    } else {
      out->append(kReplacement);
      i += prefix;
    }
  }
  return n;
}

// A compiled PCRE2 pattern. Immutable; matching allocates its own match data,
// so one Regex serves any number of threads.
class PreTokenizerStep::Regex {
 public:
  static absl::StatusOr<std::shared_ptr<const Regex>> Compile(std::string_view pattern,
                                                              bool literal) {
    const uint32_t options = literal ? (PCRE2_UTF | PCRE2_LITERAL) : (PCRE2_UTF | PCRE2_UCP);
    // \s as Hugging Face's regex engine means it (common/regex_whitespace.h).
    const std::string spelled = literal ? std::string(pattern) : SpellOutWhitespace(pattern);
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(spelled.data()), spelled.size(),
                                     options, &error, &offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      const bool rewritten = spelled != pattern;
      return absl::InvalidArgumentError(absl::StrCat(
          "PCRE2 cannot compile the pattern", rewritten ? " (\\s spelled out)" : "",
          " at offset ", offset, ": ", reinterpret_cast<const char*>(message)));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // failure just means no JIT
    return std::shared_ptr<const Regex>(new Regex(code));
  }

  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends [start, end) of every successive match in `s` (valid UTF-8).
  void FindAll(std::string_view s, std::vector<std::pair<size_t, size_t>>* out) const {
    pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
    FOLIO_CHECK(md != nullptr);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
    size_t pos = 0;
    while (pos <= s.size()) {
      int rc = pcre2_match(code_, subject, s.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {  // pathological input: use the interpreter
        rc = pcre2_match(code_, subject, s.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
                         nullptr);
      }
      if (rc < 0) break;  // no (further) match, or a resource limit: the rest is a gap
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      out->emplace_back(ov[0], ov[1]);
      if (ov[1] > ov[0]) {
        pos = ov[1];
      } else {  // empty match: resume after the next character
        pos = ov[1] + 1;
        while (pos < s.size() && (static_cast<uint8_t>(s[pos]) & 0xC0) == 0x80) ++pos;
      }
    }
    pcre2_match_data_free(md);
  }

 private:
  explicit Regex(pcre2_code* code) : code_(code) {}
  pcre2_code* const code_;
};

absl::StatusOr<PreTokenizerStep> PreTokenizerStep::Split(std::string_view pattern, bool literal,
                                                         SplitBehavior behavior, bool invert) {
  auto regex = Regex::Compile(pattern, literal);
  if (!regex.ok()) return regex.status();
  PreTokenizerStep step;
  step.regex_ = *std::move(regex);
  step.behavior_ = behavior;
  step.invert_ = invert;
  return step;
}

PreTokenizerStep PreTokenizerStep::ByteLevel(bool add_prefix_space, bool use_regex) {
  static const std::shared_ptr<const Regex> gpt2 = *Regex::Compile(kGpt2SplitPattern, false);
  PreTokenizerStep step;
  step.add_prefix_space_ = add_prefix_space;
  if (use_regex) step.regex_ = gpt2;
  return step;
}

PreTokenizerStep PreTokenizerStep::Digits(bool individual_digits) {
  static const std::shared_ptr<const Regex> digits = *Regex::Compile(R"(\p{N})", false);
  PreTokenizerStep step;
  step.regex_ = digits;
  step.behavior_ = individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous;
  return step;
}

void PreTokenizerStep::Apply(std::string_view piece, std::vector<std::string>* out) const {
  std::string prefixed;
  if (add_prefix_space_ && !piece.empty() && !piece.starts_with(' ')) {
    prefixed = absl::StrCat(" ", std::string(piece));
    piece = prefixed;
  }
  if (regex_ == nullptr) {
    if (!piece.empty()) out->emplace_back(piece);
    return;
  }
  // Matches and the gaps between them, as tokenizers' find_matches + split.
  std::vector<std::pair<size_t, size_t>> found;
  regex_->FindAll(piece, &found);
  struct Span {
    size_t start, end;
    bool match;
  };
  std::vector<Span> spans;
  spans.reserve(2 * found.size() + 1);
  size_t prev = 0;
  for (const auto& [s, e] : found) {
    if (s != prev) spans.push_back({prev, s, invert_});
    spans.push_back({s, e, !invert_});
    prev = e;
  }
  if (prev != piece.size()) spans.push_back({prev, piece.size(), invert_});

  std::vector<std::pair<size_t, size_t>> parts;
  switch (behavior_) {
    case SplitBehavior::kRemoved:
      for (const Span& sp : spans)
        if (!sp.match) parts.emplace_back(sp.start, sp.end);
      break;
    case SplitBehavior::kIsolated:
      for (const Span& sp : spans) parts.emplace_back(sp.start, sp.end);
      break;
    case SplitBehavior::kMergedWithPrevious:
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const Span& sp : spans) {
        const bool join = behavior_ == SplitBehavior::kContiguous ? sp.match == previous_match
                                                                  : sp.match && !previous_match;
        if (join && !parts.empty()) {
          parts.back().second = sp.end;
        } else {
          parts.emplace_back(sp.start, sp.end);
        }
        previous_match = sp.match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous_match = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !previous_match && !parts.empty()) {
          parts.back().first = it->start;
        } else {
          parts.emplace_back(it->start, it->end);
        }
        previous_match = it->match;
      }
      std::reverse(parts.begin(), parts.end());
      break;
    }
  }
  for (const auto& [s, e] : parts)
    if (e > s) out->emplace_back(piece.substr(s, e - s));
}

}  // namespace folio
