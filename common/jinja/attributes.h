#ifndef FOLIO_COMMON_JINJA_ATTRIBUTES_H_
#define FOLIO_COMMON_JINJA_ATTRIBUTES_H_

// The sandbox's attribute and item access (jinja2.sandbox getattr/getitem):
// `x.name` tries the Python attribute first (a method, which wins over a
// dict key of that name) and then the item; `x[key]` tries the item first
// and then, for string keys, the attribute. Misses give an Undefined that
// knows why ("'dict object' has no attribute 'foo'"); methods the immutable
// sandbox forbids (list.append, dict.update, …) give an Undefined that fails
// as a SecurityError when called. Using an Undefined any further fails.

#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/jinja/value.h"

namespace folio::jinja {

absl::StatusOr<Value> GetAttribute(const Value& obj, std::string_view name);
// Only the Python attribute (no item fallback), as the attr filter wants;
// nullopt when there is none.
std::optional<Value> GetPythonAttribute(const Value& obj, std::string_view name);
absl::StatusOr<Value> GetItem(const Value& obj, const Value& key);
// obj[start:stop:step] on str, list and tuple; each bound may be None.
absl::StatusOr<Value> GetSlice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// The error jinja raises when an Undefined is used (its message).
absl::Status UndefinedError(const Value& undefined);

}  // namespace folio::jinja

#endif  // FOLIO_COMMON_JINJA_ATTRIBUTES_H_
