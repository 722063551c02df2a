#ifndef FOLIO_COMMON_JINJA_FILTERS_H_
#define FOLIO_COMMON_JINJA_FILTERS_H_

// Internal to the builtins: the signature every filter has, the sequence
// filters (seq_filters.cc) the registry in filters.cc dispatches to, and
// the helpers both share.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/jinja/objects.h"
#include "common/jinja/value.h"

namespace folio::jinja {

class Interpreter;

using FilterFn = absl::StatusOr<Value> (*)(Interpreter& in, const Value& input, CallArgs& args);

// jinja's make_attrgetter: "a.b.0" looked up item-first on each part;
// `default` replaces an undefined result; `lower` lower-cases strings
// (the filters' case_sensitive=False).
absl::StatusOr<Value> AttrGet(const Value& item, const Value& attribute, const Value* default_value, bool lower);
// A string key for a hashable value, equal for values Python hashes equal.
absl::StatusOr<std::string> HashKey(const Value& v);
// A one-shot iterator over items, printed as `type_name`.
Value MakeIterator(std::string type_name, std::vector<Value> items);

absl::StatusOr<Value> FilterBatch(Interpreter& in, const Value& input, CallArgs& args);
absl::StatusOr<Value> FilterDictsort(Interpreter& in, const Value& input, CallArgs& args);
absl::StatusOr<Value> FilterFirst(Interpreter& in, const Value& input, CallArgs& args);
absl::StatusOr<Value> FilterGroupby(Interpreter& in, const Value& input, CallArgs& args);
absl::StatusOr<Value> FilterItems(Interpreter& in, const Value& input, CallArgs& args);
absl::StatusOr<Value> FilterJoin(Interpreter& in, const Value& input, CallArgs& args);
absl::StatusOr<Value> FilterLast(Interpreter& in, const Value& input, CallArgs& args);
absl::StatusOr<Value> FilterLength(Interpreter& in, const Value& input, CallArgs& args);
absl::StatusOr<Value> FilterList(Interpreter& in, const Value& input, CallArgs& args);
absl::StatusOr<Value> FilterMap(Interpreter& in, const Value& input, CallArgs& args);
absl::StatusOr<Value> FilterMax(Interpreter& in, const Value& input, CallArgs& args);
absl::StatusOr<Value> FilterMin(Interpreter& in, const Value& input, CallArgs& args);
absl::StatusOr<Value> FilterRandom(Interpreter& in, const Value& input, CallArgs& args);
absl::StatusOr<Value> FilterReject(Interpreter& in, const Value& input, CallArgs& args);
absl::StatusOr<Value> FilterRejectattr(Interpreter& in, const Value& input, CallArgs& args);
absl::StatusOr<Value> FilterReverse(Interpreter& in, const Value& input, CallArgs& args);
absl::StatusOr<Value> FilterSelect(Interpreter& in, const Value& input, CallArgs& args);
absl::StatusOr<Value> FilterSelectattr(Interpreter& in, const Value& input, CallArgs& args);
absl::StatusOr<Value> FilterSlice(Interpreter& in, const Value& input, CallArgs& args);
absl::StatusOr<Value> FilterSort(Interpreter& in, const Value& input, CallArgs& args);
absl::StatusOr<Value> FilterSum(Interpreter& in, const Value& input, CallArgs& args);
absl::StatusOr<Value> FilterUnique(Interpreter& in, const Value& input, CallArgs& args);

}  // namespace folio::jinja

#endif  // FOLIO_COMMON_JINJA_FILTERS_H_
