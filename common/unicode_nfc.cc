// NFC as UAX #15 defines it: decompose canonically (Hangul algorithmically),
// sort each run of non-starters by combining class, then compose each
// character with the last starter unless something between them blocks it.
#include "common/unicode_nfc.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/byte_level.h"

namespace folio {
namespace {

// Row types of the generated tables.
struct NfcDecomposition {
  char32_t code_point, first, second;  // second == 0: a singleton
};
struct NfcCombiningClassRun {
  char32_t first, last;
  uint8_t combining_class;
};

#include "common/unicode_nfc_tables.inc"

// Hangul syllable arithmetic (Unicode chapter 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr char32_t kSCount = kLCount * kVCount * kTCount;

bool IsHangulSyllable(char32_t cp) { return cp >= kSBase && cp < kSBase + kSCount; }
bool IsHangulV(char32_t cp) { return cp >= kVBase && cp < kVBase + kVCount; }
bool IsHangulT(char32_t cp) { return cp > kTBase && cp < kTBase + kTCount; }

// NFC_Quick_Check: kNo cannot occur in NFC, kMaybe may compose with what
// precedes it.
enum class QuickCheck { kYes, kMaybe, kNo };

struct CharInfo {
  uint8_t combining_class = 0;
  QuickCheck quick_check = QuickCheck::kYes;
};

// The tables as lookups, built once. A bitmap of 128-code-point blocks says
// where anything is non-trivial, so most characters (ASCII, CJK ideographs,
// emoji ...) cost one bit test.
class NfcTables {
 public:
  static const NfcTables& Get() {
    static const NfcTables* const tables = new NfcTables();
    return *tables;
  }

  bool IsTrivial(char32_t cp) const {
    const char32_t block = cp >> kBlockBits;
    return (nontrivial_blocks_[block / 64] >> (block % 64) & 1) == 0;
  }

  CharInfo Info(char32_t cp) const {
    CharInfo info;
    if (IsTrivial(cp) || IsHangulSyllable(cp)) return info;
    info.combining_class = CombiningClass(cp);
    const NfcDecomposition* d = Decomposition(cp);
    if (d != nullptr && (d->second == 0 || IsExcluded(cp))) {
      info.quick_check = QuickCheck::kNo;
    } else if (std::binary_search(seconds_.begin(), seconds_.end(), cp) || IsHangulV(cp) ||
               IsHangulT(cp)) {
      info.quick_check = QuickCheck::kMaybe;
    }
    return info;
  }

  uint8_t CombiningClass(char32_t cp) const {
    if (IsTrivial(cp)) return 0;
    const auto* end = std::end(kNfcCombiningClasses);
    const auto* it =
        std::upper_bound(std::begin(kNfcCombiningClasses), end, cp,
                         [](char32_t c, const NfcCombiningClassRun& run) { return c < run.first; });
    if (it == std::begin(kNfcCombiningClasses)) return 0;
    --it;
    return cp <= it->last ? it->combining_class : 0;
  }

  // The one-level canonical mapping of cp, or null (Hangul syllables too).
  const NfcDecomposition* Decomposition(char32_t cp) const {
    const auto* end = std::end(kNfcDecompositions);
    const auto* it =
        std::lower_bound(std::begin(kNfcDecompositions), end, cp,
                         [](const NfcDecomposition& d, char32_t c) { return d.code_point < c; });
    return it != end && it->code_point == cp ? it : nullptr;
  }

  static bool IsExcluded(char32_t cp) {
    return std::binary_search(std::begin(kNfcCompositionExclusions),
                              std::end(kNfcCompositionExclusions), cp);
  }

  // The primary composite of a starter and the character after it, or 0.
  char32_t Compose(char32_t a, char32_t b) const {
    if (a >= kLBase && a < kLBase + kLCount && IsHangulV(b))
      return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
    if (IsHangulSyllable(a) && (a - kSBase) % kTCount == 0 && IsHangulT(b)) return a + (b - kTBase);
    auto it = pairs_.find(PairKey(a, b));
    return it == pairs_.end() ? 0 : it->second;
  }

 private:
  static constexpr int kBlockBits = 7;

  NfcTables() : nontrivial_blocks_((0x110000 >> kBlockBits) / 64 + 1, 0) {
    for (const NfcDecomposition& d : kNfcDecompositions) {
      Mark(d.code_point, d.code_point);
      if (d.second == 0 || IsExcluded(d.code_point)) continue;
      pairs_[PairKey(d.first, d.second)] = d.code_point;
      seconds_.push_back(d.second);
    }
    std::sort(seconds_.begin(), seconds_.end());
    seconds_.erase(std::unique(seconds_.begin(), seconds_.end()), seconds_.end());
    for (char32_t cp : seconds_) Mark(cp, cp);
    for (const NfcCombiningClassRun& run : kNfcCombiningClasses) Mark(run.first, run.last);
    Mark(kLBase, kTBase + kTCount - 1);  // conjoining jamo
    Mark(kSBase, kSBase + kSCount - 1);  // syllables (decomposed in the slow path)
  }

  void Mark(char32_t first, char32_t last) {
    for (char32_t block = first >> kBlockBits; block <= (last >> kBlockBits); ++block)
      nontrivial_blocks_[block / 64] |= uint64_t{1} << (block % 64);
  }

  static uint64_t PairKey(char32_t a, char32_t b) { return (uint64_t{a} << 32) | b; }

  std::vector<uint64_t> nontrivial_blocks_;
  absl::flat_hash_map<uint64_t, char32_t> pairs_;
  std::vector<char32_t> seconds_;  // sorted: characters that compose with a previous one
};

// The code point at text[pos] and its length, or 0 if the bytes there are
// not well-formed UTF-8 (overlong, surrogate, above U+10FFFF, truncated).
size_t DecodeUtf8(std::string_view text, size_t pos, char32_t* cp) {
  const auto b0 = static_cast<uint8_t>(text[pos]);
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  size_t len;
  char32_t c;
  if (b0 >= 0xC2 && b0 < 0xE0) {
    len = 2;
    c = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 < 0xF0) {
    len = 3;
    c = b0 & 0x0F;
  } else if (b0 >= 0xF0 && b0 < 0xF5) {
    len = 4;
    c = b0 & 0x07;
  } else {
    return 0;
  }
  if (pos + len > text.size()) return 0;
  for (size_t i = 1; i < len; ++i) {
    const auto b = static_cast<uint8_t>(text[pos + i]);
    if ((b & 0xC0) != 0x80) return 0;
    c = (c << 6) | (b & 0x3F);
  }
  if ((len == 3 && (c < 0x800 || (c >= 0xD800 && c <= 0xDFFF))) ||
      (len == 4 && (c < 0x10000 || c > 0x10FFFF)))
    return 0;
  *cp = c;
  return len;
}

struct Decomposed {
  char32_t cp;
  uint8_t combining_class;
};

void AppendDecomposition(const NfcTables& tables, char32_t cp, std::vector<Decomposed>* out) {
  if (tables.IsTrivial(cp)) {
    out->push_back({cp, 0});
  } else if (IsHangulSyllable(cp)) {
    const char32_t s = cp - kSBase;
    out->push_back({kLBase + s / (kVCount * kTCount), 0});
    out->push_back({kVBase + (s / kTCount) % kVCount, 0});
    if (s % kTCount != 0) out->push_back({kTBase + s % kTCount, 0});
  } else if (const NfcDecomposition* d = tables.Decomposition(cp)) {
    AppendDecomposition(tables, d->first, out);
    if (d->second != 0) AppendDecomposition(tables, d->second, out);
  } else {
    out->push_back({cp, tables.CombiningClass(cp)});
  }
}

// Canonical ordering and composition of a decomposed stretch, appended as UTF-8.
void ComposeInto(const NfcTables& tables, std::vector<Decomposed>* chars, std::string* out) {
  std::vector<Decomposed>& v = *chars;
  if (v.empty()) return;
  for (size_t i = 0; i < v.size();) {
    if (v[i].combining_class == 0) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < v.size() && v[end].combining_class != 0) ++end;
    std::stable_sort(v.begin() + i, v.begin() + end, [](const Decomposed& a, const Decomposed& b) {
      return a.combining_class < b.combining_class;
    });
    i = end;
  }
  // The composition algorithm of UAX #15: `last_class` is that of the last
  // character kept after the starter; 256 before any starter.
  size_t starter = 0, kept = 1;
  int last_class = v[0].combining_class == 0 ? 0 : 256;
  for (size_t i = 1; i < v.size(); ++i) {
    const Decomposed c = v[i];
    const char32_t composite = last_class == 256 ? 0 : tables.Compose(v[starter].cp, c.cp);
    if (composite != 0 && (last_class < c.combining_class || last_class == 0)) {
      v[starter].cp = composite;
      continue;
    }
    if (c.combining_class == 0) starter = kept;
    last_class = c.combining_class;
    v[kept++] = c;
  }
  for (size_t i = 0; i < kept; ++i) {
    if (v[i].cp < 0x80) {
      out->push_back(static_cast<char>(v[i].cp));
    } else {
      AppendUtf8(v[i].cp, out);
    }
  }
  v.clear();
}

}  // namespace

std::string NfcNormalize(std::string_view utf8) {
  const NfcTables& tables = NfcTables::Get();
  // Quick check: find the first character that may change, and the last
  // starter before it that nothing after it can reach (`restart`).
  size_t pos = 0, restart = 0;
  uint8_t last_class = 0;
  while (pos < utf8.size()) {
    if (static_cast<uint8_t>(utf8[pos]) < 0x80) {
      restart = pos++;
      last_class = 0;
      continue;
    }
    char32_t cp;
    const size_t len = DecodeUtf8(utf8, pos, &cp);
    if (len == 0) {  // passes through, composes with nothing
      restart = pos++;
      last_class = 0;
      continue;
    }
    const CharInfo info = tables.Info(cp);
    if (info.quick_check != QuickCheck::kYes ||
        (info.combining_class != 0 && last_class > info.combining_class))
      break;
    if (info.combining_class == 0) restart = pos;
    last_class = info.combining_class;
    pos += len;
  }
  if (pos >= utf8.size()) return std::string(utf8);

  std::string out(utf8.substr(0, restart));
  out.reserve(utf8.size() + 16);
  std::vector<Decomposed> stretch;  // decomposed since the last safe starter
  for (pos = restart; pos < utf8.size();) {
    // ASCII followed by ASCII composes with nothing: copy it.
    if (static_cast<uint8_t>(utf8[pos]) < 0x80 &&
        (pos + 1 == utf8.size() || static_cast<uint8_t>(utf8[pos + 1]) < 0x80)) {
      ComposeInto(tables, &stretch, &out);
      out.push_back(utf8[pos++]);
      continue;
    }
    char32_t cp;
    const size_t len = DecodeUtf8(utf8, pos, &cp);
    if (len == 0) {
      ComposeInto(tables, &stretch, &out);
      out.push_back(utf8[pos++]);
      continue;
    }
    // A starter that is NFC_QC=Yes starts a stretch that cannot interact
    // with the one before it: keep the buffer short.
    const CharInfo info = tables.Info(cp);
    if (info.combining_class == 0 && info.quick_check == QuickCheck::kYes)
      ComposeInto(tables, &stretch, &out);
    AppendDecomposition(tables, cp, &stretch);
    pos += len;
  }
  ComposeInto(tables, &stretch, &out);
  return out;
}

std::string_view NfcUnicodeVersion() { return kNfcUnicodeVersion; }

}  // namespace folio
