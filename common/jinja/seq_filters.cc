// jinja's filters over sequences and mappings (jinja2/filters.py), with
// Python's sorting (stable, TypeError on unorderable mixes) and jinja's
// generator results as one-shot iterators.

#include <algorithm>
#include <bit>
#include <random>
#include <unordered_set>

#include "common/jinja/cat.h"

#include "common/jinja/attributes.h"
#include "common/jinja/builtins.h"
#include "common/jinja/errors.h"
#include "common/jinja/filters.h"
#include "common/jinja/interpreter.h"
#include "common/jinja/operators.h"
#include "common/jinja/py_format.h"
#include "common/jinja/text.h"

namespace folio::jinja {
namespace {

using Flavor = ListData::Flavor;

Value Lowered(const Value& v) { return v.is_string() ? Value::String(text::Lower(v.str())) : v; }

absl::StatusOr<std::vector<Value>> Items(Interpreter& in, const Value& v) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  FOLIO_JINJA_RETURN_IF_ERROR(in.Charge(static_cast<int64_t>(items.size() / 8)));
  return items;
}

// Stable sort by precomputed keys with Python's <; reverse keeps stability.
absl::Status SortByKeys(Interpreter& in, std::vector<Value>* items, std::vector<Value> keys, bool reverse) {
  std::vector<size_t> order(items->size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  absl::Status error;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (!error.ok()) return false;
    absl::StatusOr<int> c = reverse ? Compare(keys[b], keys[a]) : Compare(keys[a], keys[b]);
    if (!c.ok()) {
      error = c.status();
      return false;
    }
    return *c < 0;
  });
  FOLIO_JINJA_RETURN_IF_ERROR(error);
  size_t n = items->size();
  FOLIO_JINJA_RETURN_IF_ERROR(in.Charge(static_cast<int64_t>(n * (std::bit_width(n) + 1) / 8)));
  std::vector<Value> sorted;
  sorted.reserve(n);
  for (size_t i : order) sorted.push_back(std::move((*items)[i]));
  *items = std::move(sorted);
  return absl::OkStatus();
}

// select / reject / selectattr / rejectattr.
absl::StatusOr<Value> SelectOrReject(Interpreter& in, const Value& input, CallArgs& args, bool select,
                                     bool lookup_attr) {
  if (!Truthy(input)) return MakeIterator("generator", {});
  size_t off = 0;
  Value attr;
  if (lookup_attr) {
    if (args.positional.empty()) return TemplateError("Missing parameter for attribute name");
    attr = args.positional[0];
    off = 1;
  }
  std::optional<std::string> test;
  CallArgs test_args;
  if (args.positional.size() > off) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(std::string name, Str(args.positional[off]));
    test = std::move(name);
    test_args.positional.assign(args.positional.begin() + off + 1, args.positional.end());
    test_args.keyword = args.keyword;
  }
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, Items(in, input));
  std::vector<Value> out;
  for (Value& item : items) {
    Value subject = item;
    if (lookup_attr) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(subject, AttrGet(item, attr, nullptr, false));
    }
    bool pass;
    if (test) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(pass, in.CallTest(*test, subject, test_args));
    } else {
      pass = Truthy(subject);
    }
    if (pass == select) out.push_back(std::move(item));
  }
  return MakeIterator("generator", std::move(out));
}

absl::StatusOr<Value> MinOrMax(Interpreter& in, const Value& input, CallArgs& args, bool max) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs(max ? "max" : "min", args, {"case_sensitive", "attribute"}));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, Items(in, input));
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  bool lower = !(a[0] && Truthy(*a[0]));
  Value attribute = a[1] ? *a[1] : Value::None();
  size_t best = 0;
  Value best_key;
  for (size_t i = 0; i < items.size(); ++i) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(Value key, AttrGet(items[i], attribute, nullptr, lower));
    if (i == 0) {
      best_key = std::move(key);
      continue;
    }
    FOLIO_JINJA_ASSIGN_OR_RETURN(int c, Compare(key, best_key, max ? ">" : "<"));
    if (max ? c > 0 : c < 0) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}

}  // namespace

absl::StatusOr<Value> AttrGet(const Value& item, const Value& attribute, const Value* default_value, bool lower) {
  Value v = item;
  if (attribute.is_string()) {
    for (std::string_view part : Split(attribute.str(), '.')) {
      bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
      FOLIO_JINJA_ASSIGN_OR_RETURN(v, GetItem(v, digits ? Value::Int(std::stoll(std::string(part)))
                                                        : Value::String(std::string(part))));
      if (default_value != nullptr && v.is_undefined()) v = *default_value;
    }
  } else if (!attribute.is_none()) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(v, GetItem(v, attribute));
    if (default_value != nullptr && v.is_undefined()) v = *default_value;
  }
  return lower ? Lowered(v) : v;
}

absl::StatusOr<std::string> HashKey(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return std::string("U");
    case Value::Kind::kNone: return std::string("N");
    case Value::Kind::kBool:
    case Value::Kind::kInt: return Cat("n", v.as_int());
    case Value::Kind::kFloat: {
      double d = v.as_double();
      if (d == static_cast<double>(static_cast<int64_t>(d)) && std::abs(d) < 9e18) {
        return Cat("n", static_cast<int64_t>(d));
      }
      return Cat("f", FloatRepr(d));
    }
    case Value::Kind::kString: return Cat("s", v.str());
    case Value::Kind::kList:
      if (v.is_tuple()) {
        std::string key = "t(";
        for (const Value& item : v.list().items) {
          FOLIO_JINJA_ASSIGN_OR_RETURN(std::string k, HashKey(item));
          Append(&key, k.size(), ":", k);
        }
        return key + ")";
      }
      break;
    case Value::Kind::kObject:
      return Cat("o", reinterpret_cast<uintptr_t>(v.identity()));
    default: break;
  }
  return TemplateError(Cat("unhashable type: '", TypeName(v), "'"));
}

Value MakeIterator(std::string type_name, std::vector<Value> items) {
  return Value::FromObject(std::make_shared<IteratorObject>(std::move(type_name), std::move(items)));
}

absl::StatusOr<Value> FilterLength(Interpreter& in, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("length", args, {}));
  switch (input.kind()) {
    case Value::Kind::kUndefined: return Value::Int(0);
    case Value::Kind::kString: return Value::Int(static_cast<int64_t>(text::Length(input.str())));
    case Value::Kind::kList: return Value::Int(static_cast<int64_t>(input.list().items.size()));
    case Value::Kind::kDict: return Value::Int(static_cast<int64_t>(input.dict().size()));
    case Value::Kind::kObject:
      if (input.object().kind() == Object::Kind::kLoop) {
        return Value::Int(static_cast<int64_t>(static_cast<LoopObject&>(input.object()).items().size()));
      }
      break;
    default: break;
  }
  return TemplateError(Cat("object of type '", TypeName(input), "' has no len()"));
}

absl::StatusOr<Value> FilterList(Interpreter& in, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("list", args, {}));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, Items(in, input));
  return Value::List(std::move(items));
}

absl::StatusOr<Value> FilterFirst(Interpreter& in, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("first", args, {}));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, Items(in, input));
  if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
  return items.front();
}

absl::StatusOr<Value> FilterLast(Interpreter& in, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("last", args, {}));
  if (input.is_object() && input.object().kind() == Object::Kind::kIterator) {
    return TemplateError("'generator' object is not reversible");
  }
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, Items(in, input));
  if (items.empty()) return Value::Undefined("No last item, sequence was empty.");
  return items.back();
}

absl::StatusOr<Value> FilterJoin(Interpreter& in, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("join", args, {"d", "attribute"}));
  std::string sep;
  if (a[0]) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(sep, Str(*a[0]));
  }
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, Items(in, input));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    Value item = items[i];
    if (a[1] && !a[1]->is_none()) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(item, AttrGet(item, *a[1], nullptr, false));
    }
    FOLIO_JINJA_RETURN_IF_ERROR(AppendStr(&out, item));
    if (static_cast<int64_t>(out.size()) > in.max_output_bytes()) {
      return LimitError(Cat("join result exceeds max_output_bytes (", in.max_output_bytes(), ")"));
    }
  }
  FOLIO_JINJA_RETURN_IF_ERROR(in.ChargeBytes(out.size()));
  return Value::String(std::move(out));
}

absl::StatusOr<Value> FilterSort(Interpreter& in, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("sort", args, {"reverse", "case_sensitive", "attribute"}));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, Items(in, input));
  bool lower = !(a[1] && Truthy(*a[1]));
  // make_multi_attrgetter: "a,b" sorts by several attributes.
  std::vector<Value> attributes;
  if (a[2] && a[2]->is_string()) {
    for (std::string_view part : Split(a[2]->str(), ',')) attributes.push_back(Value::String(std::string(part)));
  } else {
    attributes.push_back(a[2] ? *a[2] : Value::None());
  }
  std::vector<Value> keys;
  keys.reserve(items.size());
  for (const Value& item : items) {
    std::vector<Value> parts;
    for (const Value& attr : attributes) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(Value k, AttrGet(item, attr, nullptr, lower));
      parts.push_back(std::move(k));
    }
    keys.push_back(Value::List(std::move(parts)));
  }
  FOLIO_JINJA_RETURN_IF_ERROR(SortByKeys(in, &items, std::move(keys), a[0] && Truthy(*a[0])));
  return Value::List(std::move(items));
}

absl::StatusOr<Value> FilterDictsort(Interpreter& in, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("dictsort", args, {"case_sensitive", "by", "reverse"}));
  if (input.is_undefined()) return UndefinedError(input);
  if (!input.is_dict()) return TemplateError(Cat("'", TypeName(input), "' object has no attribute 'items'"));
  int pos = 0;
  if (a[1]) {
    if (a[1]->is_string() && a[1]->str() == "value") {
      pos = 1;
    } else if (!a[1]->is_string() || a[1]->str() != "key") {
      return TemplateError("You can only sort by either \"key\" or \"value\"");
    }
  }
  bool lower = !(a[0] && Truthy(*a[0]));
  std::vector<Value> items, keys;
  for (const auto& [k, v] : input.dict().entries()) {
    items.push_back(Value::Tuple({k, v}));
    keys.push_back(lower ? Lowered(pos == 0 ? k : v) : (pos == 0 ? k : v));
  }
  FOLIO_JINJA_RETURN_IF_ERROR(SortByKeys(in, &items, std::move(keys), a[2] && Truthy(*a[2])));
  return Value::List(std::move(items));
}

absl::StatusOr<Value> FilterItems(Interpreter& in, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("items", args, {}));
  if (input.is_undefined()) return MakeIterator("generator", {});
  if (!input.is_dict()) return TemplateError("Can only get item pairs from a mapping.");
  std::vector<Value> items;
  for (const auto& [k, v] : input.dict().entries()) items.push_back(Value::Tuple({k, v}));
  return MakeIterator("generator", std::move(items));
}

absl::StatusOr<Value> FilterUnique(Interpreter& in, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("unique", args, {"case_sensitive", "attribute"}));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, Items(in, input));
  bool lower = !(a[0] && Truthy(*a[0]));
  Value attribute = a[1] ? *a[1] : Value::None();
  std::unordered_set<std::string> seen;
  std::vector<Value> out;
  for (Value& item : items) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(Value key, AttrGet(item, attribute, nullptr, lower));
    FOLIO_JINJA_ASSIGN_OR_RETURN(std::string hk, HashKey(key));
    if (seen.insert(std::move(hk)).second) out.push_back(std::move(item));
  }
  return MakeIterator("generator", std::move(out));
}

absl::StatusOr<Value> FilterMin(Interpreter& in, const Value& input, CallArgs& args) {
  return MinOrMax(in, input, args, false);
}

absl::StatusOr<Value> FilterMax(Interpreter& in, const Value& input, CallArgs& args) {
  return MinOrMax(in, input, args, true);
}

absl::StatusOr<Value> FilterSum(Interpreter& in, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("sum", args, {"attribute", "start"}));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, Items(in, input));
  Value total = a[1] ? *a[1] : Value::Int(0);
  for (const Value& item : items) {
    Value v = item;
    if (a[0] && !a[0]->is_none()) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(v, AttrGet(item, *a[0], nullptr, false));
    }
    if (v.is_undefined()) return UndefinedError(v);
    if (total.is_string()) return TemplateError("sum() can't sum strings [use ''.join(seq) instead]");
    FOLIO_JINJA_ASSIGN_OR_RETURN(total, Arithmetic(BinaryOp::kAdd, total, v, in.max_output_bytes()));
  }
  return total;
}

absl::StatusOr<Value> FilterMap(Interpreter& in, const Value& input, CallArgs& args) {
  if (!Truthy(input)) return MakeIterator("generator", {});
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, Items(in, input));
  std::vector<Value> out;
  out.reserve(items.size());
  auto attr_it = std::find_if(args.keyword.begin(), args.keyword.end(), [](const auto& kv) { return kv.first == "attribute"; });
  if (args.positional.empty() && attr_it != args.keyword.end()) {
    Value attribute = attr_it->second;
    std::optional<Value> default_value;
    for (const auto& [k, v] : args.keyword) {
      if (k == "default") {
        default_value = v;
      } else if (k != "attribute") {
        return TemplateError(Cat("Unexpected keyword argument '", k, "'"));
      }
    }
    for (const Value& item : items) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(Value v, AttrGet(item, attribute, default_value && !default_value->is_none()
                                                                         ? &*default_value
                                                                         : nullptr,
                                                    false));
      out.push_back(std::move(v));
    }
    return MakeIterator("generator", std::move(out));
  }
  if (args.positional.empty()) return TemplateError("map requires a filter argument");
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string filter, Str(args.positional[0]));
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : items) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(Value v, in.CallFilter(filter, item, rest));
    out.push_back(std::move(v));
  }
  return MakeIterator("generator", std::move(out));
}

absl::StatusOr<Value> FilterSelect(Interpreter& in, const Value& input, CallArgs& args) {
  return SelectOrReject(in, input, args, true, false);
}
absl::StatusOr<Value> FilterReject(Interpreter& in, const Value& input, CallArgs& args) {
  return SelectOrReject(in, input, args, false, false);
}
absl::StatusOr<Value> FilterSelectattr(Interpreter& in, const Value& input, CallArgs& args) {
  return SelectOrReject(in, input, args, true, true);
}
absl::StatusOr<Value> FilterRejectattr(Interpreter& in, const Value& input, CallArgs& args) {
  return SelectOrReject(in, input, args, false, true);
}

absl::StatusOr<Value> FilterReverse(Interpreter& in, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("reverse", args, {}));
  if (input.is_string()) {
    std::u32string u = text::ToU32(input.str());
    std::reverse(u.begin(), u.end());
    return Value::String(text::FromU32(u));
  }
  bool generator = input.is_object() && input.object().kind() == Object::Kind::kIterator;
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, Items(in, input));
  std::reverse(items.begin(), items.end());
  if (generator) return Value::List(std::move(items));  // not reversible: jinja makes a list
  std::string type = "reversed";
  if (input.is_list()) {
    switch (input.list().flavor) {
      case Flavor::kList: type = "list_reverseiterator"; break;
      case Flavor::kDictKeys: type = "dict_reversekeyiterator"; break;
      case Flavor::kDictValues: type = "dict_reversevalueiterator"; break;
      case Flavor::kDictItems: type = "dict_reverseitemiterator"; break;
      default: break;
    }
  } else if (input.is_dict()) {
    type = "dict_reversekeyiterator";
  }
  return MakeIterator(type, std::move(items));
}

absl::StatusOr<Value> FilterBatch(Interpreter& in, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("batch", args, {"linecount", "fill_with"}, 1));
  FOLIO_JINJA_ASSIGN_OR_RETURN(int64_t n, ToIndex(*a[0], "batch"));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, Items(in, input));
  std::vector<Value> out;
  std::vector<Value> tmp;
  for (Value& item : items) {
    if (static_cast<int64_t>(tmp.size()) == n) {
      out.push_back(Value::List(std::move(tmp)));
      tmp.clear();
    }
    tmp.push_back(std::move(item));
  }
  if (!tmp.empty()) {
    if (a[1] && !a[1]->is_none()) {
      FOLIO_JINJA_RETURN_IF_ERROR(in.Charge(n - static_cast<int64_t>(tmp.size())));
      while (static_cast<int64_t>(tmp.size()) < n) tmp.push_back(*a[1]);
    }
    out.push_back(Value::List(std::move(tmp)));
  }
  return MakeIterator("generator", std::move(out));
}

absl::StatusOr<Value> FilterSlice(Interpreter& in, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("slice", args, {"slices", "fill_with"}, 1));
  FOLIO_JINJA_ASSIGN_OR_RETURN(int64_t slices, ToIndex(*a[0], "slice"));
  if (slices <= 0) return TemplateError("integer division or modulo by zero");
  FOLIO_JINJA_RETURN_IF_ERROR(in.Charge(slices));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> seq, Items(in, input));
  int64_t length = static_cast<int64_t>(seq.size());
  int64_t per = length / slices, extra = length % slices, offset = 0;
  std::vector<Value> out;
  for (int64_t k = 0; k < slices; ++k) {
    int64_t start = offset + k * per;
    if (k < extra) ++offset;
    int64_t end = offset + (k + 1) * per;
    std::vector<Value> part(seq.begin() + start, seq.begin() + end);
    if (a[1] && !a[1]->is_none() && k >= extra) part.push_back(*a[1]);
    out.push_back(Value::List(std::move(part)));
  }
  return MakeIterator("generator", std::move(out));
}

absl::StatusOr<Value> FilterGroupby(Interpreter& in, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("groupby", args, {"attribute", "default", "case_sensitive"}, 1));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, Items(in, input));
  bool lower = !(a[2] && Truthy(*a[2]));
  const Value* default_value = a[1] && !a[1]->is_none() ? &*a[1] : nullptr;
  std::vector<Value> keys;
  for (const Value& item : items) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(Value k, AttrGet(item, *a[0], default_value, lower));
    keys.push_back(std::move(k));
  }
  std::vector<Value> sorted_keys = keys;
  {
    // sort the items and their keys together
    std::vector<Value> pairs;
    for (size_t i = 0; i < items.size(); ++i) pairs.push_back(Value::Tuple({keys[i], items[i]}));
    FOLIO_JINJA_RETURN_IF_ERROR(SortByKeys(in, &pairs, keys, false));
    for (size_t i = 0; i < pairs.size(); ++i) {
      sorted_keys[i] = pairs[i].list().items[0];
      items[i] = pairs[i].list().items[1];
    }
  }
  std::vector<Value> groups;
  for (size_t i = 0; i < items.size();) {
    size_t j = i;
    std::vector<Value> members;
    while (j < items.size() && Equals(sorted_keys[j], sorted_keys[i])) members.push_back(items[j++]);
    Value grouper = sorted_keys[i];
    if (lower) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(grouper, AttrGet(members.front(), *a[0], default_value, false));
    }
    Value group = Value::Tuple({grouper, Value::List(std::move(members))});
    group.list().group = true;
    groups.push_back(std::move(group));
    i = j;
  }
  return Value::List(std::move(groups));
}

absl::StatusOr<Value> FilterRandom(Interpreter& in, const Value& input, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("random", args, {}));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, Items(in, input));
  if (items.empty()) return Value::Undefined("No random item, sequence was empty.");
  thread_local std::mt19937_64 rng(std::random_device{}());
  return items[std::uniform_int_distribution<size_t>(0, items.size() - 1)(rng)];
}

}  // namespace folio::jinja
