// The globals transformers' environment offers (jinja's range, dict,
// namespace, cycler, joiner, plus raise_exception and strftime_now), and
// the argument binding every builtin uses.

#include <ctime>

#include "common/jinja/builtins.h"
#include "common/jinja/cat.h"
#include "common/jinja/errors.h"
#include "common/jinja/interpreter.h"
#include "common/jinja/operators.h"
#include "common/jinja/py_format.h"

namespace folio::jinja {
namespace {

// jinja2.sandbox.MAX_RANGE
constexpr int64_t kMaxRange = 100000;

absl::StatusOr<Value> Range(Interpreter& in, CallArgs& args) {
  if (!args.keyword.empty()) return TemplateError("range() takes no keyword arguments");
  if (args.positional.empty() || args.positional.size() > 3) {
    return TemplateError(Cat("range expected at most 3 arguments, got ", args.positional.size()));
  }
  int64_t v[3];
  for (size_t i = 0; i < args.positional.size(); ++i) {
    const Value& a = args.positional[i];
    if (!a.is_integral()) {
      return TemplateError(Cat("'", TypeName(a), "' object cannot be interpreted as an integer"));
    }
    v[i] = a.as_int();
  }
  int64_t start = 0, stop, step = 1;
  if (args.positional.size() == 1) {
    stop = v[0];
  } else {
    start = v[0];
    stop = v[1];
    if (args.positional.size() == 3) step = v[2];
  }
  if (step == 0) return TemplateError("range() arg 3 must not be zero");
  __int128 count = 0;
  if (step > 0 && stop > start) count = (static_cast<__int128>(stop) - start + step - 1) / step;
  if (step < 0 && stop < start) count = (static_cast<__int128>(start) - stop - step - 1) / -step;
  if (count > kMaxRange) {
    return LimitError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  FOLIO_JINJA_RETURN_IF_ERROR(in.Charge(static_cast<int64_t>(count / 16)));
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) items.push_back(Value::Int(start + i * step));
  return Value::List(std::move(items));
}

// dict(mapping_or_pairs, **kwargs)
absl::StatusOr<Value> DictFn(Interpreter&, CallArgs& args) {
  auto dict = std::make_shared<DictData>();
  if (args.positional.size() > 1) {
    return TemplateError(Cat("dict expected at most 1 argument, got ", args.positional.size()));
  }
  if (args.positional.size() == 1) {
    const Value& src = args.positional[0];
    if (src.is_dict()) {
      for (const auto& [k, v] : src.dict().entries()) dict->Set(k, v);
    } else {
      FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> pairs, Iterate(src));
      for (const Value& p : pairs) {
        FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> kv, Iterate(p));
        if (kv.size() != 2) return TemplateError("dictionary update sequence element has the wrong length");
        if (!IsHashable(kv[0])) return TemplateError(Cat("unhashable type: '", TypeName(kv[0]), "'"));
        dict->Set(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : args.keyword) dict->Set(Value::String(k), v);
  return Value::Dict(std::move(dict));
}

absl::StatusOr<Value> NamespaceFn(Interpreter& in, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(Value init, DictFn(in, args));
  std::shared_ptr<NamespaceObject> ns = in.NewNamespace();
  for (const auto& [k, v] : init.dict().entries()) ns->attrs().Set(k, v);
  return Value::FromObject(std::move(ns));
}

absl::StatusOr<Value> CyclerFn(Interpreter&, CallArgs& args) {
  if (args.positional.empty()) return TemplateError("at least one item has to be provided");
  if (!args.keyword.empty()) return TemplateError("cycler() takes no keyword arguments");
  return Value::FromObject(std::make_shared<CyclerObject>(args.positional));
}

absl::StatusOr<Value> JoinerFn(Interpreter&, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("joiner", args, {"sep"}));
  std::string sep = ", ";
  if (a[0]) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(sep, Str(*a[0]));
  }
  return Value::FromObject(std::make_shared<JoinerObject>(std::move(sep)));
}

absl::StatusOr<Value> RaiseException(Interpreter&, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("raise_exception", args, {"message"}, 1));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string message, Str(*a[0]));
  return RaisedError(message);
}

absl::StatusOr<Value> StrftimeNow(Interpreter&, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("strftime_now", args, {"format"}, 1));
  if (!a[0]->is_string()) return TemplateError("strftime() argument 1 must be str");
  std::time_t now = std::time(nullptr);
  std::tm local;
  localtime_r(&now, &local);
  // strftime has no way to tell an empty result from a short buffer.
  std::string fmt = a[0]->str() + "\x01";
  std::string buf(fmt.size() * 8 + 64, '\0');
  size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &local);
  if (n == 0) return TemplateError("strftime_now: format too long");
  buf.resize(n - 1);
  return Value::String(std::move(buf));
}

struct GlobalEntry {
  std::string_view name;
  FunctionObject::Fn fn;
};

constexpr GlobalEntry kGlobals[] = {
    {"cycler", CyclerFn},          {"dict", DictFn},           {"joiner", JoinerFn},
    {"namespace", NamespaceFn},    {"raise_exception", RaiseException},
    {"range", Range},              {"strftime_now", StrftimeNow},
};

}  // namespace

std::optional<Value> LookupGlobal(std::string_view name) {
  for (const GlobalEntry& g : kGlobals) {
    if (g.name == name) return Value::FromObject(std::make_shared<FunctionObject>(std::string(name), g.fn));
  }
  return std::nullopt;
}

absl::StatusOr<std::vector<std::optional<Value>>> BindArgs(std::string_view function, const CallArgs& args,
                                                           std::initializer_list<std::string_view> params,
                                                           size_t required) {
  std::vector<std::optional<Value>> out(params.size());
  if (args.positional.size() > params.size()) {
    return TemplateError(Cat(function, "() takes at most ", params.size(), " argument(s) (",
                                      args.positional.size(), " given)"));
  }
  for (size_t i = 0; i < args.positional.size(); ++i) out[i] = args.positional[i];
  for (const auto& [name, value] : args.keyword) {
    size_t i = 0;
    for (std::string_view p : params) {
      if (p == name) break;
      ++i;
    }
    if (i == params.size()) {
      return TemplateError(Cat(function, "() got an unexpected keyword argument '", name, "'"));
    }
    if (out[i]) return TemplateError(Cat(function, "() got multiple values for argument '", name, "'"));
    out[i] = value;
  }
  for (size_t i = 0; i < required; ++i) {
    if (!out[i]) {
      return TemplateError(Cat(function, "() missing required argument '", *(params.begin() + i), "'"));
    }
  }
  return out;
}

absl::StatusOr<int64_t> ToIndex(const Value& v, std::string_view what) {
  if (v.is_integral()) return v.as_int();
  return TemplateError(Cat(what, "(): '", TypeName(v), "' object cannot be interpreted as an integer"));
}

}  // namespace folio::jinja
