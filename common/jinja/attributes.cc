#include "common/jinja/attributes.h"

#include <vector>

#include "common/jinja/builtins.h"
#include "common/jinja/cat.h"
#include "common/jinja/errors.h"
#include "common/jinja/objects.h"
#include "common/jinja/py_format.h"
#include "common/jinja/text.h"

namespace folio::jinja {
namespace {

using Flavor = ListData::Flavor;

std::string Quoted(std::string_view s) {
  std::string out;
  AppendStringRepr(&out, s);
  return out;
}

// jinja's Undefined(obj=…, name=…) messages.
Value NoAttribute(const Value& obj, std::string_view name) {
  return Value::Undefined(Cat(Quoted(ObjectTypeRepr(obj)), " has no attribute ", Quoted(name)));
}

Value NoElement(const Value& obj, const Value& key) {
  if (key.is_string()) return NoAttribute(obj, key.str());
  absl::StatusOr<std::string> key_repr = Repr(key);
  // jinja quotes the type for attributes but not for elements.
  return Value::Undefined(Cat(ObjectTypeRepr(obj), " has no element ", key_repr.ok() ? *key_repr : std::string("?")));
}

Value Unsafe(const Value& obj, std::string_view name) {
  return Value::Undefined(Cat("access to attribute ", Quoted(name), " of ", Quoted(TypeName(obj)),
                                       " object is unsafe."),
                          /*security=*/true);
}

bool IsDunder(std::string_view name) {
  return name.size() > 4 && name.substr(0, 2) == "__" && name.substr(name.size() - 2) == "__";
}

// The attribute part of getattr: a method, or an object's own attribute.
std::optional<Value> PythonAttribute(const Value& obj, std::string_view name) {
  switch (FindMethod(obj, name)) {
    case MethodAccess::kSafe: return Value::FromObject(std::make_shared<MethodObject>(obj, std::string(name)));
    case MethodAccess::kUnsafe: return Unsafe(obj, name);
    case MethodAccess::kNone: break;
  }
  if (IsDunder(name)) return Unsafe(obj, name);
  if (obj.is_list() && obj.list().group) {
    if (name == "grouper") return obj.list().items[0];
    if (name == "list") return obj.list().items[1];
  }
  if (obj.is_number() && (name == "real" || name == "imag")) {
    if (name == "imag") return obj.is_float() ? Value::Float(0) : Value::Int(0);
    return obj.is_float() ? obj : Value::Int(obj.as_int());
  }
  if (obj.is_object()) {
    Object& o = obj.object();
    switch (o.kind()) {
      case Object::Kind::kNamespace:
        if (const Value* v = static_cast<NamespaceObject&>(o).attrs().FindString(name)) return *v;
        break;
      case Object::Kind::kLoop:
        if (std::optional<Value> v = static_cast<LoopObject&>(o).Attribute(name)) return v;
        break;
      case Object::Kind::kCycler:
        if (name == "current") return static_cast<CyclerObject&>(o).current();
        break;
      case Object::Kind::kMacro: {
        const ast::Macro& m = static_cast<MacroObject&>(o).node();
        if (name == "name") return Value::String(m.name);
        if (name == "arguments") {
          std::vector<Value> params;
          for (const std::string& p : m.params) params.push_back(Value::String(p));
          return Value::Tuple(std::move(params));
        }
        if (name == "catch_kwargs") return Value::Bool(m.uses_kwargs);
        if (name == "catch_varargs") return Value::Bool(m.uses_varargs);
        if (name == "caller") return Value::Bool(m.uses_caller);
        break;
      }
      default: break;
    }
  }
  return std::nullopt;
}

int64_t ClampIndex(int64_t i, int64_t len, int64_t lower, int64_t upper) {
  if (i < 0) i += len;
  if (i < lower) return lower;
  if (i > upper) return upper;
  return i;
}

}  // namespace

absl::Status UndefinedError(const Value& undefined) {
  const UndefinedInfo* info = undefined.undefined_info();
  return TemplateError(info == nullptr ? "undefined value" : info->message);
}

std::optional<Value> GetPythonAttribute(const Value& obj, std::string_view name) {
  return PythonAttribute(obj, name);
}

absl::StatusOr<Value> GetAttribute(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (std::optional<Value> attr = PythonAttribute(obj, name)) return *std::move(attr);
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().FindString(name)) return *v;
  }
  return NoAttribute(obj, name);
}

absl::StatusOr<Value> GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return UndefinedError(obj);
  switch (obj.kind()) {
    case Value::Kind::kDict:
      if (IsHashable(key)) {
        if (const Value* v = obj.dict().Find(key)) return *v;
      }
      break;
    case Value::Kind::kList:
    case Value::Kind::kString: {
      if (!key.is_integral()) break;
      if (obj.is_list() && obj.list().flavor != Flavor::kList && obj.list().flavor != Flavor::kTuple) break;
      int64_t i = key.as_int();
      if (obj.is_list()) {
        const auto& items = obj.list().items;
        int64_t len = static_cast<int64_t>(items.size());
        if (i < 0) i += len;
        if (i < 0 || i >= len) return NoElement(obj, key);
        return items[i];
      }
      const std::string& s = obj.str();
      if (text::IsAscii(s)) {
        int64_t len = static_cast<int64_t>(s.size());
        if (i < 0) i += len;
        if (i < 0 || i >= len) return NoElement(obj, key);
        return Value::String(s.substr(i, 1));
      }
      std::u32string u = text::ToU32(s);
      int64_t len = static_cast<int64_t>(u.size());
      if (i < 0) i += len;
      if (i < 0 || i >= len) return NoElement(obj, key);
      return Value::String(text::FromU32(u.substr(i, 1)));
    }
    default: break;
  }
  // jinja falls back to the attribute for string keys.
  if (key.is_string()) {
    if (std::optional<Value> attr = PythonAttribute(obj, key.str())) return *std::move(attr);
  }
  return NoElement(obj, key);
}

absl::StatusOr<Value> GetSlice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) return UndefinedError(obj);
  auto bad_slice = [&]() -> absl::StatusOr<Value> {
    std::string repr = "slice(";
    for (const Value* v : {&start, &stop, &step}) {
      absl::StatusOr<std::string> r = Repr(*v);
      Append(&repr, v == &start ? "" : ", ", r.ok() ? *r : "?");
    }
    return Value::Undefined(Cat(ObjectTypeRepr(obj), " has no element ", repr, ")"));
  };
  bool sequence = obj.is_string() || (obj.is_list() && (obj.list().flavor == Flavor::kList ||
                                                       obj.list().flavor == Flavor::kTuple));
  for (const Value* v : {&start, &stop, &step}) {
    if (!v->is_none() && !v->is_integral()) return bad_slice();
  }
  if (!sequence) return bad_slice();
  int64_t st = step.is_none() ? 1 : step.as_int();
  if (st == 0) return TemplateError("slice step cannot be zero");

  std::u32string u;
  bool ascii = obj.is_string() && text::IsAscii(obj.str());
  if (obj.is_string() && !ascii) u = text::ToU32(obj.str());
  const int64_t len = obj.is_list() ? static_cast<int64_t>(obj.list().items.size())
                                    : ascii ? static_cast<int64_t>(obj.str().size()) : static_cast<int64_t>(u.size());
  int64_t lower = st > 0 ? 0 : -1;
  int64_t upper = st > 0 ? len : len - 1;
  int64_t b = start.is_none() ? (st > 0 ? lower : upper) : ClampIndex(start.as_int(), len, lower, upper);
  int64_t e = stop.is_none() ? (st > 0 ? upper : lower) : ClampIndex(stop.as_int(), len, lower, upper);
  std::vector<int64_t> picks;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) picks.push_back(i);
  if (obj.is_list()) {
    std::vector<Value> items;
    items.reserve(picks.size());
    for (int64_t i : picks) items.push_back(obj.list().items[i]);
    return Value::List(std::move(items), obj.list().flavor);
  }
  if (ascii) {
    if (st == 1) return Value::String(obj.str().substr(b, e > b ? e - b : 0));
    std::string out;
    for (int64_t i : picks) out.push_back(obj.str()[i]);
    return Value::String(std::move(out));
  }
  std::u32string out;
  for (int64_t i : picks) out.push_back(u[i]);
  return Value::String(text::FromU32(out));
}

}  // namespace folio::jinja
