// jinja's builtin tests (jinja2/tests.py): `x is defined`, `x is divisibleby 3`.

#include <algorithm>
#include <cmath>

#include "common/jinja/attributes.h"
#include "common/jinja/builtins.h"
#include "common/jinja/cat.h"
#include "common/jinja/errors.h"
#include "common/jinja/interpreter.h"
#include "common/jinja/operators.h"
#include "common/jinja/py_format.h"
#include "common/jinja/str_methods.h"
#include "common/jinja/text.h"

namespace folio::jinja {
namespace {

using TestFn = absl::StatusOr<bool> (*)(Interpreter& in, const Value& v, CallArgs& args);

absl::StatusOr<Value> OneArg(std::string_view name, CallArgs& args) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"other"}, 1));
  return *a[0];
}

absl::Status NoArgs(std::string_view name, CallArgs& args) {
  return BindArgs(name, args, {}).status();
}

// value % n == r, with Python's operators (and their errors).
absl::StatusOr<bool> ModEquals(Interpreter& in, const Value& v, const Value& n, int64_t r) {
  if (v.is_undefined()) return UndefinedError(v);
  FOLIO_JINJA_ASSIGN_OR_RETURN(Value m, Arithmetic(BinaryOp::kMod, v, n, in.max_output_bytes()));
  return Equals(m, Value::Int(r));
}

absl::StatusOr<bool> Ordered(const Value& a, const Value& b, std::string_view op) {
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  FOLIO_JINJA_ASSIGN_OR_RETURN(int c, Compare(a, b, op));
  if ((a.is_float() && std::isnan(a.as_double())) || (b.is_float() && std::isnan(b.as_double()))) return false;
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

absl::StatusOr<bool> CaseTest(const Value& v, CallArgs& args, std::string_view name) {
  FOLIO_JINJA_RETURN_IF_ERROR(NoArgs(name, args));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string s, Str(v));
  bool any_cased = false;
  for (char32_t cp : text::ToU32(s)) {
    if (name == "lower" ? text::IsUpper(cp) : text::IsLower(cp)) return false;
    any_cased = any_cased || text::IsUpper(cp) || text::IsLower(cp);
  }
  return any_cased;
}

bool IsObjectKind(const Value& v, Object::Kind k) { return v.is_object() && v.object().kind() == k; }

struct TestEntry {
  std::string_view name;
  TestFn fn;
};

#define FOLIO_JINJA_TEST(body) [](Interpreter & in, const Value& v, CallArgs& args) -> absl::StatusOr<bool> body

// jinja2.tests.TESTS, sorted by name.
const TestEntry kTests[] = {
    {"!=", FOLIO_JINJA_TEST({
       FOLIO_JINJA_ASSIGN_OR_RETURN(Value o, OneArg("ne", args));
       return !Equals(v, o);
     })},
    {"<", FOLIO_JINJA_TEST({
       FOLIO_JINJA_ASSIGN_OR_RETURN(Value o, OneArg("lt", args));
       return Ordered(v, o, "<");
     })},
    {"<=", FOLIO_JINJA_TEST({
       FOLIO_JINJA_ASSIGN_OR_RETURN(Value o, OneArg("le", args));
       return Ordered(v, o, "<=");
     })},
    {"==", FOLIO_JINJA_TEST({
       FOLIO_JINJA_ASSIGN_OR_RETURN(Value o, OneArg("eq", args));
       return Equals(v, o);
     })},
    {">", FOLIO_JINJA_TEST({
       FOLIO_JINJA_ASSIGN_OR_RETURN(Value o, OneArg("gt", args));
       return Ordered(v, o, ">");
     })},
    {">=", FOLIO_JINJA_TEST({
       FOLIO_JINJA_ASSIGN_OR_RETURN(Value o, OneArg("ge", args));
       return Ordered(v, o, ">=");
     })},
    {"boolean", FOLIO_JINJA_TEST({
       FOLIO_JINJA_RETURN_IF_ERROR(NoArgs("boolean", args));
       return v.is_bool();
     })},
    {"callable", FOLIO_JINJA_TEST({
       FOLIO_JINJA_RETURN_IF_ERROR(NoArgs("callable", args));
       // Undefined defines __call__ (to fail), so Python calls it callable.
       return v.is_undefined() || (v.is_object() && v.object().Callable());
     })},
    {"defined", FOLIO_JINJA_TEST({
       FOLIO_JINJA_RETURN_IF_ERROR(NoArgs("defined", args));
       return !v.is_undefined();
     })},
    {"divisibleby", FOLIO_JINJA_TEST({
       FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("divisibleby", args, {"num"}, 1));
       return ModEquals(in, v, *a[0], 0);
     })},
    {"eq", FOLIO_JINJA_TEST({
       FOLIO_JINJA_ASSIGN_OR_RETURN(Value o, OneArg("eq", args));
       return Equals(v, o);
     })},
    {"equalto", FOLIO_JINJA_TEST({
       FOLIO_JINJA_ASSIGN_OR_RETURN(Value o, OneArg("equalto", args));
       return Equals(v, o);
     })},
    {"escaped", FOLIO_JINJA_TEST({
       FOLIO_JINJA_RETURN_IF_ERROR(NoArgs("escaped", args));
       return false;
     })},
    {"even", FOLIO_JINJA_TEST({
       FOLIO_JINJA_RETURN_IF_ERROR(NoArgs("even", args));
       return ModEquals(in, v, Value::Int(2), 0);
     })},
    {"false", FOLIO_JINJA_TEST({
       FOLIO_JINJA_RETURN_IF_ERROR(NoArgs("false", args));
       return v.is_bool() && !v.as_bool();
     })},
    {"filter", FOLIO_JINJA_TEST({
       FOLIO_JINJA_RETURN_IF_ERROR(NoArgs("filter", args));
       return v.is_string() && IsKnownFilter(v.str());
     })},
    {"float", FOLIO_JINJA_TEST({
       FOLIO_JINJA_RETURN_IF_ERROR(NoArgs("float", args));
       return v.is_float();
     })},
    {"ge", FOLIO_JINJA_TEST({
       FOLIO_JINJA_ASSIGN_OR_RETURN(Value o, OneArg("ge", args));
       return Ordered(v, o, ">=");
     })},
    {"greaterthan", FOLIO_JINJA_TEST({
       FOLIO_JINJA_ASSIGN_OR_RETURN(Value o, OneArg("greaterthan", args));
       return Ordered(v, o, ">");
     })},
    {"gt", FOLIO_JINJA_TEST({
       FOLIO_JINJA_ASSIGN_OR_RETURN(Value o, OneArg("gt", args));
       return Ordered(v, o, ">");
     })},
    {"in", FOLIO_JINJA_TEST({
       FOLIO_JINJA_ASSIGN_OR_RETURN(auto a, BindArgs("in", args, {"seq"}, 1));
       return Contains(*a[0], v);
     })},
    {"integer", FOLIO_JINJA_TEST({
       FOLIO_JINJA_RETURN_IF_ERROR(NoArgs("integer", args));
       return v.is_int();
     })},
    {"iterable", FOLIO_JINJA_TEST({
       FOLIO_JINJA_RETURN_IF_ERROR(NoArgs("iterable", args));
       return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict() ||
              IsObjectKind(v, Object::Kind::kIterator) || IsObjectKind(v, Object::Kind::kLoop);
     })},
    {"le", FOLIO_JINJA_TEST({
       FOLIO_JINJA_ASSIGN_OR_RETURN(Value o, OneArg("le", args));
       return Ordered(v, o, "<=");
     })},
    {"lessthan", FOLIO_JINJA_TEST({
       FOLIO_JINJA_ASSIGN_OR_RETURN(Value o, OneArg("lessthan", args));
       return Ordered(v, o, "<");
     })},
    {"lower", FOLIO_JINJA_TEST({ return CaseTest(v, args, "lower"); })},
    {"lt", FOLIO_JINJA_TEST({
       FOLIO_JINJA_ASSIGN_OR_RETURN(Value o, OneArg("lt", args));
       return Ordered(v, o, "<");
     })},
    {"mapping", FOLIO_JINJA_TEST({
       FOLIO_JINJA_RETURN_IF_ERROR(NoArgs("mapping", args));
       return v.is_dict();
     })},
    {"ne", FOLIO_JINJA_TEST({
       FOLIO_JINJA_ASSIGN_OR_RETURN(Value o, OneArg("ne", args));
       return !Equals(v, o);
     })},
    {"none", FOLIO_JINJA_TEST({
       FOLIO_JINJA_RETURN_IF_ERROR(NoArgs("none", args));
       return v.is_none();
     })},
    {"number", FOLIO_JINJA_TEST({
       FOLIO_JINJA_RETURN_IF_ERROR(NoArgs("number", args));
       return v.is_number();
     })},
    {"odd", FOLIO_JINJA_TEST({
       FOLIO_JINJA_RETURN_IF_ERROR(NoArgs("odd", args));
       return ModEquals(in, v, Value::Int(2), 1);
     })},
    {"sameas", FOLIO_JINJA_TEST({
       FOLIO_JINJA_ASSIGN_OR_RETURN(Value o, OneArg("sameas", args));
       if (v.identity() != nullptr || o.identity() != nullptr) {
         // containers and objects: identity; strings: equal text (Python
         // interns the short strings templates compare).
         if (v.is_string() && o.is_string()) return v.str() == o.str();
         return v.identity() == o.identity();
       }
       if (v.kind() != o.kind()) return false;
       return Equals(v, o);
     })},
    {"sequence", FOLIO_JINJA_TEST({
       FOLIO_JINJA_RETURN_IF_ERROR(NoArgs("sequence", args));
       // len() and __getitem__: Undefined has both.
       return v.is_undefined() || v.is_string() || v.is_dict() ||
              (v.is_list() && (v.list().flavor == ListData::Flavor::kList ||
                               v.list().flavor == ListData::Flavor::kTuple));
     })},
    {"string", FOLIO_JINJA_TEST({
       FOLIO_JINJA_RETURN_IF_ERROR(NoArgs("string", args));
       return v.is_string();
     })},
    {"test", FOLIO_JINJA_TEST({
       FOLIO_JINJA_RETURN_IF_ERROR(NoArgs("test", args));
       return v.is_string() && IsKnownTest(v.str());
     })},
    {"true", FOLIO_JINJA_TEST({
       FOLIO_JINJA_RETURN_IF_ERROR(NoArgs("true", args));
       return v.is_bool() && v.as_bool();
     })},
    {"undefined", FOLIO_JINJA_TEST({
       FOLIO_JINJA_RETURN_IF_ERROR(NoArgs("undefined", args));
       return v.is_undefined();
     })},
    {"upper", FOLIO_JINJA_TEST({ return CaseTest(v, args, "upper"); })},
};

#undef FOLIO_JINJA_TEST

const TestEntry* FindTest(std::string_view name) {
  auto it = std::lower_bound(std::begin(kTests), std::end(kTests), name,
                             [](const TestEntry& e, std::string_view n) { return e.name < n; });
  return it != std::end(kTests) && it->name == name ? it : nullptr;
}

}  // namespace

bool IsKnownTest(std::string_view name) { return FindTest(name) != nullptr; }

absl::StatusOr<bool> ApplyTest(Interpreter& in, std::string_view name, const Value& input, CallArgs& args) {
  const TestEntry* t = FindTest(name);
  if (t == nullptr) return TemplateError(Cat("No test named '", name, "' found."));
  return t->fn(in, input, args);
}

}  // namespace folio::jinja
