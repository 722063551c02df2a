#ifndef FOLIO_COMMON_JINJA_PY_FORMAT_H_
#define FOLIO_COMMON_JINJA_PY_FORMAT_H_

// Python's text forms of values: str() (what {{ x }} prints), repr(),
// json.dumps() (transformers' tojson), printf-style `%` formatting (the
// format filter) and the format-spec mini-language (str.format).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/jinja/value.h"

namespace folio::jinja {

// Nesting a container may have when printed; past it, like Python's
// RecursionError, printing fails.
inline constexpr int kMaxPrintDepth = 500;

// The most bytes one call here may produce (a repr, a json.dumps, a
// %-format): the interpreter sets it to max_output_bytes for the duration
// of a render on its thread; past it the call fails with RESOURCE_EXHAUSTED.
class ScopedFormatLimit {
 public:
  explicit ScopedFormatLimit(int64_t max_bytes);
  ScopedFormatLimit(const ScopedFormatLimit&) = delete;
  ScopedFormatLimit& operator=(const ScopedFormatLimit&) = delete;
  ~ScopedFormatLimit();

 private:
  int64_t saved_;
};
// RESOURCE_EXHAUSTED when `size` bytes are past the current limit.
absl::Status CheckFormatLimit(size_t size);

// float.__repr__: shortest round trip, "1.0", "1e-05", "1e+16", "inf".
std::string FloatRepr(double d);
// repr() of a str: quotes and escapes as Python chooses them.
void AppendStringRepr(std::string* out, std::string_view s);

// str(v) / repr(v) appended to out.
absl::Status AppendStr(std::string* out, const Value& v);
absl::Status AppendRepr(std::string* out, const Value& v, int depth = 0);
absl::StatusOr<std::string> Str(const Value& v);
absl::StatusOr<std::string> Repr(const Value& v);

struct JsonOptions {
  std::optional<std::string> indent;  // spaces (or the string) per level
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
// json.dumps(v, …). INVALID_ARGUMENT "Object of type X is not JSON
// serializable" for undefined, objects and the like.
absl::StatusOr<std::string> ToJson(const Value& v, const JsonOptions& options);

// format % args, where args is a tuple (positional) or a dict (mapping
// keys, "%(name)s"). allow_unused: leftover arguments are no error (Python
// skips that check when the right operand is a non-tuple sequence).
absl::StatusOr<std::string> PercentFormat(std::string_view format, const Value& args, bool allow_unused = false);

// format(value, spec): the format-spec mini-language for str, int and float.
absl::StatusOr<std::string> FormatWithSpec(const Value& value, std::string_view spec);

}  // namespace folio::jinja

#endif  // FOLIO_COMMON_JINJA_PY_FORMAT_H_
