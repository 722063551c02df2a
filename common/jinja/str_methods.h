#ifndef FOLIO_COMMON_JINJA_STR_METHODS_H_
#define FOLIO_COMMON_JINJA_STR_METHODS_H_

// Python's str methods over UTF-8 (indices count code points), shared by
// the str methods templates call and the filters built on them.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/jinja/objects.h"
#include "common/jinja/value.h"

namespace folio::jinja {

class Interpreter;

// str.strip/lstrip/rstrip: `chars` null strips whitespace.
std::string PyStrip(std::string_view s, const std::string* chars, bool left, bool right);
// str.replace(old, new, count); count < 0 replaces all.
std::string PyReplace(std::string_view s, std::string_view old, std::string_view replacement, int64_t count);
// The size PyReplace's result will have, to check before making it.
size_t PyReplaceSize(std::string_view s, std::string_view old, std::string_view replacement, int64_t count);
std::string PyCapitalize(std::string_view s);
std::string PyTitle(std::string_view s);
// str.split / str.rsplit: sep null splits on runs of whitespace.
std::vector<std::string> PySplit(std::string_view s, const std::string* sep, int64_t maxsplit, bool from_right);
std::vector<std::string> PySplitLines(std::string_view s, bool keepends);
std::string PyCenter(std::string_view s, int64_t width, char32_t fill);

// str.<name>(*args). REQUIRES: FindMethod says `name` is a str method.
absl::StatusOr<Value> StrMethod(Interpreter& in, const Value& self, std::string_view name, CallArgs& args);
// str.format(*args, **kwargs) with the sandbox's field lookups.
absl::StatusOr<std::string> PyStrFormat(std::string_view format, const CallArgs& args);

}  // namespace folio::jinja

#endif  // FOLIO_COMMON_JINJA_STR_METHODS_H_
