// Python methods of str, list, tuple and dict (and of loop / cycler
// objects) as ImmutableSandboxedEnvironment exposes them.

#include <algorithm>
#include <string>
#include <vector>

#include "common/jinja/attributes.h"
#include "common/jinja/builtins.h"
#include "common/jinja/cat.h"
#include "common/jinja/errors.h"
#include "common/jinja/interpreter.h"
#include "common/jinja/operators.h"
#include "common/jinja/py_format.h"
#include "common/jinja/str_methods.h"

namespace folio::jinja {
namespace {

using Flavor = ListData::Flavor;

constexpr std::string_view kStrMethods[] = {
    "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find", "format",
    "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier", "islower",
    "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip",
    "maketrans", "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust",
    "rpartition", "rsplit", "rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title",
    "translate", "upper", "zfill"};
// MutableSequence methods the immutable sandbox refuses; list.pop and
// list.clear are not among them (jinja only lists the abc's methods).
constexpr std::string_view kListUnsafe[] = {"append", "extend", "insert", "remove", "reverse", "sort"};
constexpr std::string_view kListSafe[] = {"clear", "copy", "count", "index", "pop"};
constexpr std::string_view kTupleSafe[] = {"count", "index"};
constexpr std::string_view kDictUnsafe[] = {"clear", "pop", "popitem", "setdefault", "update"};
constexpr std::string_view kDictSafe[] = {"copy", "fromkeys", "get", "items", "keys", "values"};

template <size_t N>
bool In(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

absl::StatusOr<Value> ListMethod(Interpreter& in, const Value& self, std::string_view name, CallArgs& args) {
  std::vector<Value>& items = self.list().items;
  if (name == "count") {
    FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("count", args, {"value"}, 1));
    int64_t n = 0;
    for (const Value& v : items) n += Equals(v, *a[0]) ? 1 : 0;
    return Value::Int(n);
  }
  if (name == "index") {
    FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("index", args, {"value", "start", "stop"}, 1));
    int64_t len = static_cast<int64_t>(items.size());
    int64_t start = 0, stop = len;
    if (a[1]) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(start, ToIndex(*a[1], "index"));
    }
    if (a[2]) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(stop, ToIndex(*a[2], "index"));
    }
    if (start < 0) start = std::max<int64_t>(0, start + len);
    if (stop < 0) stop = std::max<int64_t>(0, stop + len);
    for (int64_t i = start; i < std::min(stop, len); ++i) {
      if (Equals(items[i], *a[0])) return Value::Int(i);
    }
    FOLIO_JINJA_ASSIGN_OR_RETURN(std::string r, Repr(*a[0]));
    return TemplateError(Cat(r, " is not in ", TypeName(self)));
  }
  if (name == "copy") return Value::List(items, Flavor::kList);
  if (name == "clear") {
    FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("clear", args, {}));
    ReleaseValues(&items);
    return Value::None();
  }
  if (name == "pop") {
    FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("pop", args, {"index"}));
    int64_t len = static_cast<int64_t>(items.size());
    if (len == 0) return TemplateError("pop from empty list");
    int64_t i = len - 1;
    if (a[0]) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(i, ToIndex(*a[0], "pop"));
    }
    if (i < 0) i += len;
    if (i < 0 || i >= len) return TemplateError("pop index out of range");
    Value v = std::move(items[i]);
    items.erase(items.begin() + i);
    FOLIO_JINJA_RETURN_IF_ERROR(in.Charge(len / 16));
    return v;
  }
  return TemplateError(Cat("list.", name, " is not supported"));
}

absl::StatusOr<Value> DictMethod(Interpreter& in, const Value& self, std::string_view name, CallArgs& args) {
  const DictData& d = self.dict();
  if (name == "get") {
    FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("get", args, {"key", "default"}, 1));
    if (!IsHashable(*a[0])) return TemplateError(Cat("unhashable type: '", TypeName(*a[0]), "'"));
    if (const Value* v = d.Find(*a[0])) return *v;
    return a[1] ? *a[1] : Value::None();
  }
  if (name == "items" || name == "keys" || name == "values") {
    FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {}));
    std::vector<Value> out;
    out.reserve(d.size());
    for (const auto& [k, v] : d.entries()) {
      if (name == "items") {
        out.push_back(Value::Tuple({k, v}));
      } else {
        out.push_back(name == "keys" ? k : v);
      }
    }
    FOLIO_JINJA_RETURN_IF_ERROR(in.Charge(static_cast<int64_t>(d.size() / 8)));
    return Value::List(std::move(out), name == "items"  ? Flavor::kDictItems
                                       : name == "keys" ? Flavor::kDictKeys
                                                        : Flavor::kDictValues);
  }
  if (name == "copy") {
    auto copy = std::make_shared<DictData>();
    for (const auto& [k, v] : d.entries()) copy->Set(k, v);
    return Value::Dict(std::move(copy));
  }
  if (name == "fromkeys") {
    FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("fromkeys", args, {"iterable", "value"}, 1));
    FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> keys, Iterate(*a[0]));
    auto out = std::make_shared<DictData>();
    for (Value& k : keys) {
      if (!IsHashable(k)) return TemplateError(Cat("unhashable type: '", TypeName(k), "'"));
      out->Set(std::move(k), a[1] ? *a[1] : Value::None());
    }
    return Value::Dict(std::move(out));
  }
  return TemplateError(Cat("dict.", name, " is not supported"));
}

absl::StatusOr<Value> ObjectMethod(Interpreter& in, const Value& self, std::string_view name, CallArgs& args) {
  Object& o = self.object();
  if (o.kind() == Object::Kind::kLoop) {
    auto& loop = static_cast<LoopObject&>(o);
    if (!args.keyword.empty()) return TemplateError(Cat("loop.", name, "() takes no keyword arguments"));
    if (name == "cycle") {
      if (args.positional.empty()) return TemplateError("no items for cycling given");
      return args.positional[loop.index0() % static_cast<int64_t>(args.positional.size())];
    }
    return Value::Bool(loop.Changed(std::move(args.positional)));
  }
  auto& cycler = static_cast<CyclerObject&>(o);
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {}));
  if (name == "next") return cycler.Next();
  cycler.Reset();
  return Value::None();
}

}  // namespace

MethodAccess FindMethod(const Value& self, std::string_view name) {
  switch (self.kind()) {
    case Value::Kind::kString: return In(kStrMethods, name) ? MethodAccess::kSafe : MethodAccess::kNone;
    case Value::Kind::kList:
      switch (self.list().flavor) {
        case Flavor::kList:
          if (In(kListSafe, name)) return MethodAccess::kSafe;
          return In(kListUnsafe, name) ? MethodAccess::kUnsafe : MethodAccess::kNone;
        case Flavor::kTuple: return In(kTupleSafe, name) ? MethodAccess::kSafe : MethodAccess::kNone;
        default: return MethodAccess::kNone;
      }
    case Value::Kind::kDict:
      if (In(kDictSafe, name)) return MethodAccess::kSafe;
      return In(kDictUnsafe, name) ? MethodAccess::kUnsafe : MethodAccess::kNone;
    case Value::Kind::kObject:
      if (self.object().kind() == Object::Kind::kLoop && (name == "cycle" || name == "changed")) {
        return MethodAccess::kSafe;
      }
      if (self.object().kind() == Object::Kind::kCycler && (name == "next" || name == "reset")) {
        return MethodAccess::kSafe;
      }
      return MethodAccess::kNone;
    default: return MethodAccess::kNone;
  }
}

absl::StatusOr<Value> CallMethod(Interpreter& in, const Value& self, std::string_view name, CallArgs& args) {
  switch (self.kind()) {
    case Value::Kind::kString: return StrMethod(in, self, name, args);
    case Value::Kind::kList: return ListMethod(in, self, name, args);
    case Value::Kind::kDict: return DictMethod(in, self, name, args);
    case Value::Kind::kObject: return ObjectMethod(in, self, name, args);
    default: return TemplateError(Cat("'", TypeName(self), "' object has no method '", name, "'"));
  }
}

}  // namespace folio::jinja
