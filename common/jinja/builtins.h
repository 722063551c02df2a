#ifndef FOLIO_COMMON_JINJA_BUILTINS_H_
#define FOLIO_COMMON_JINJA_BUILTINS_H_

// What a template can call by name: jinja's filters (filters.cc) and tests
// (predicates.cc), transformers' globals (globals.cc), and the Python
// methods of str, list and dict the sandbox lets through (methods.cc).
// Semantics follow jinja2 3.1 as transformers configures it; tojson is
// transformers' json.dumps override.

#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/jinja/objects.h"
#include "common/jinja/value.h"

namespace folio::jinja {

class Interpreter;

bool IsKnownFilter(std::string_view name);
bool IsKnownTest(std::string_view name);

// INVALID_ARGUMENT "No filter named 'x' found." for unknown names.
absl::StatusOr<Value> ApplyFilter(Interpreter& in, std::string_view name, const Value& input, CallArgs& args);
absl::StatusOr<bool> ApplyTest(Interpreter& in, std::string_view name, const Value& input, CallArgs& args);

// range, namespace, dict, cycler, joiner, raise_exception, strftime_now.
std::optional<Value> LookupGlobal(std::string_view name);

// Whether `self` has a Python attribute `name` that is a method, and
// whether ImmutableSandboxedEnvironment lets it be called.
enum class MethodAccess { kNone, kSafe, kUnsafe };
MethodAccess FindMethod(const Value& self, std::string_view name);
// REQUIRES: FindMethod(self, name) == MethodAccess::kSafe.
absl::StatusOr<Value> CallMethod(Interpreter& in, const Value& self, std::string_view name, CallArgs& args);

// Python-style binding of call arguments to named parameters: positional
// first, then keywords. The first `required` must be given. TypeError-like
// INVALID_ARGUMENT on extra, duplicate, unknown or missing arguments.
absl::StatusOr<std::vector<std::optional<Value>>> BindArgs(std::string_view function, const CallArgs& args,
                                                           std::initializer_list<std::string_view> params,
                                                           size_t required = 0);

// Python int(x) / float(x) conversions used by several builtins.
absl::StatusOr<int64_t> ToIndex(const Value& v, std::string_view what);

}  // namespace folio::jinja

#endif  // FOLIO_COMMON_JINJA_BUILTINS_H_
