#ifndef FOLIO_COMMON_JINJA_CAT_H_
#define FOLIO_COMMON_JINJA_CAT_H_

// String concatenation over std::string_view: Debian's abseil is built with
// its own absl::string_view, which absl::StrCat will not take a
// std::string_view for.

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/strings/string_view.h"

namespace folio::jinja {
namespace cat_internal {

inline void Piece(std::string* out, const char* s) { out->append(s); }
inline void Piece(std::string* out, const std::string& s) { out->append(s); }
inline void Piece(std::string* out, std::string_view s) { out->append(s); }
inline void Piece(std::string* out, absl::string_view s) { out->append(s.data(), s.size()); }
template <typename T, typename = std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool> &&
                                                  !std::is_same_v<T, char>>>
void Piece(std::string* out, T v) {
  out->append(std::to_string(v));
}

}  // namespace cat_internal

template <typename... Args>
std::string Cat(const Args&... args) {
  std::string out;
  (cat_internal::Piece(&out, args), ...);
  return out;
}

template <typename... Args>
void Append(std::string* out, const Args&... args) {
  (cat_internal::Piece(out, args), ...);
}

// s split at every `sep` (empty pieces kept).
inline std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t hit = s.find(sep, start);
    if (hit == std::string_view::npos) {
      parts.push_back(s.substr(start));
      return parts;
    }
    parts.push_back(s.substr(start, hit - start));
    start = hit + 1;
  }
}

}  // namespace folio::jinja

#endif  // FOLIO_COMMON_JINJA_CAT_H_
