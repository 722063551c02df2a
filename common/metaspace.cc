#include "common/metaspace.h"

#include <cstdint>

#include "common/byte_level.h"
#include "common/unicode_nfc.h"

namespace folio {
namespace {

void ReplaceAll(std::string* s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  out.reserve(s->size());
  size_t pos = 0;
  for (size_t hit; (hit = s->find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(*s, pos, hit - pos);
    out.append(to);
  }
  out.append(*s, pos, std::string::npos);
  s->swap(out);
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string Normalize(std::string_view text, const std::vector<NormalizerStep>& steps) {
  std::string s(text);
  for (const NormalizerStep& step : steps) {
    if (step.kind == NormalizerStep::Kind::kPrepend) {
      if (!s.empty()) s.insert(0, step.to);
    } else if (step.kind == NormalizerStep::Kind::kNfc) {
      s = NfcNormalize(s);
    } else {
      ReplaceAll(&s, step.from, step.to);
    }
  }
  return s;
}

void ApplyMetaspace(std::string_view text, const MetaspaceSpec& spec, bool first,
                    std::vector<std::string>* pieces) {
  std::string s(text);
  ReplaceAll(&s, " ", spec.replacement);
  const bool prepend = spec.prepend == MetaspaceSpec::Prepend::kAlways ||
                       (spec.prepend == MetaspaceSpec::Prepend::kFirst && first);
  if (prepend && !s.empty() && s.compare(0, spec.replacement.size(), spec.replacement) != 0) {
    s.insert(0, spec.replacement);
  }
  if (s.empty()) return;
  if (!spec.split || spec.replacement.empty()) {
    pieces->push_back(std::move(s));
    return;
  }
  // Cut before every replacement (MergedWithNext).
  size_t begin = 0;
  for (size_t hit = s.find(spec.replacement, 1); hit != std::string::npos;
       hit = s.find(spec.replacement, hit + spec.replacement.size())) {
    if (hit > begin) pieces->push_back(s.substr(begin, hit - begin));
    begin = hit;
  }
  pieces->push_back(s.substr(begin));
}

void AppendByteFallbackRun(std::string_view run, size_t tokens, std::string* out) {
  if (IsValidUtf8(run)) {
    out->append(run);
    return;
  }
  for (size_t i = 0; i < tokens; ++i) out->append("\xEF\xBF\xBD");  // U+FFFD
}

int ByteFallbackValue(std::string_view spelled) {
  if (spelled.size() != 6 || spelled.substr(0, 3) != "<0x" || spelled[5] != '>') return -1;
  const int hi = HexDigit(spelled[3]), lo = HexDigit(spelled[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

size_t Utf8CharLength(std::string_view text) {
  if (text.empty()) return 0;
  const auto lead = static_cast<uint8_t>(text[0]);
  const size_t n = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3
                   : (lead >> 3) == 0x1E                ? 4
                                                        : 1;
  if (n > text.size()) return 1;
  for (size_t i = 1; i < n; ++i) {
    if ((static_cast<uint8_t>(text[i]) & 0xC0) != 0x80) return 1;
  }
  return n;
}

}  // namespace folio
