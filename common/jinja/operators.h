#ifndef FOLIO_COMMON_JINJA_OPERATORS_H_
#define FOLIO_COMMON_JINJA_OPERATORS_H_

// Python's operators over template values: ==, ordering, `in`, arithmetic.
// Integers are 64-bit: where Python would grow a big integer these return
// INVALID_ARGUMENT "integer overflow" instead of a wrong number.
// None of these see Undefined operands except Equals/Contains (callers
// raise the undefined error first, as jinja's Undefined does).

#include <string_view>

#include "absl/status/statusor.h"
#include "common/jinja/value.h"

namespace folio::jinja {

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };

// Python a == b (Undefined equals only Undefined).
bool Equals(const Value& a, const Value& b);
// Python's ordering for a < b: negative, zero or positive. TypeError
// ("'<' not supported between instances of 'int' and 'str'") when the
// types do not order; `op` is the operator named in that message.
absl::StatusOr<int> Compare(const Value& a, const Value& b, std::string_view op = "<");
// Whether Python could hash v (no lists, dicts or objects inside).
bool IsHashable(const Value& v);
// item in container.
absl::StatusOr<bool> Contains(const Value& container, const Value& item);
// a <op> b. max_bytes bounds strings and lists made by * (RESOURCE_EXHAUSTED).
absl::StatusOr<Value> Arithmetic(BinaryOp op, const Value& a, const Value& b, int64_t max_bytes);
absl::StatusOr<Value> Negate(const Value& v);
absl::StatusOr<Value> UnaryPlus(const Value& v);

}  // namespace folio::jinja

#endif  // FOLIO_COMMON_JINJA_OPERATORS_H_
