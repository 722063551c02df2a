// Interpreter: expressions and calls (statements are in interpreter.cc).

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/jinja/attributes.h"
#include "common/jinja/builtins.h"
#include "common/jinja/cat.h"
#include "common/jinja/errors.h"
#include "common/jinja/interpreter.h"
#include "common/jinja/operators.h"
#include "common/jinja/py_format.h"

namespace folio::jinja {
namespace {

using ast::ExprKind;


const char* CompareOpText(ast::CompareOp op) {
  switch (op) {
    case ast::CompareOp::kLt: return "<";
    case ast::CompareOp::kLe: return "<=";
    case ast::CompareOp::kGt: return ">";
    case ast::CompareOp::kGe: return ">=";
    default: return "==";
  }
}

}  // namespace

absl::StatusOr<Value> Interpreter::Eval(const ast::Expr& expr, const ScopePtr& scope) {
  if (eval_depth_ >= options_.max_depth * kNestingPerDepth) {
    return AtLine(LimitError(Cat("the template nests deeper than max_depth (", options_.max_depth, ")")),
                  expr.line);
  }
  FOLIO_JINJA_RETURN_IF_ERROR(AtLine(Charge(1), expr.line));
  ++eval_depth_;
  absl::StatusOr<Value> v = EvalInner(expr, scope);
  --eval_depth_;
  if (!v.ok()) return AtLine(v.status(), expr.line);
  return v;
}

absl::StatusOr<Value> Interpreter::EvalInner(const ast::Expr& expr, const ScopePtr& scope) {
  switch (expr.kind) {
    case ExprKind::kConst: return static_cast<const ast::Const&>(expr).value;
    case ExprKind::kName: return EvalName(static_cast<const ast::Name&>(expr), scope);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      const auto& node = static_cast<const ast::Sequence&>(expr);
      std::vector<Value> items;
      items.reserve(node.items.size());
      for (const auto& item : node.items) {
        FOLIO_JINJA_ASSIGN_OR_RETURN(Value v, Eval(*item, scope));
        items.push_back(std::move(v));
      }
      return Value::List(std::move(items),
                         expr.kind == ExprKind::kList ? ListData::Flavor::kList : ListData::Flavor::kTuple);
    }
    case ExprKind::kDict: {
      auto dict = std::make_shared<DictData>();
      for (const auto& [key_expr, value_expr] : static_cast<const ast::DictLit&>(expr).items) {
        FOLIO_JINJA_ASSIGN_OR_RETURN(Value key, Eval(*key_expr, scope));
        FOLIO_JINJA_ASSIGN_OR_RETURN(Value value, Eval(*value_expr, scope));
        if (!IsHashable(key)) return TemplateError(Cat("unhashable type: '", TypeName(key), "'"));
        dict->Set(std::move(key), std::move(value));
      }
      return Value::Dict(std::move(dict));
    }
    case ExprKind::kGetattr: {
      const auto& node = static_cast<const ast::Getattr&>(expr);
      FOLIO_JINJA_ASSIGN_OR_RETURN(Value obj, Eval(*node.object, scope));
      return GetAttribute(obj, node.attr);
    }
    case ExprKind::kGetitem: return EvalSubscript(static_cast<const ast::Getitem&>(expr), scope);
    case ExprKind::kSlice: return TemplateError("a slice can only be used in a subscript");
    case ExprKind::kUnary: {
      const auto& node = static_cast<const ast::Unary&>(expr);
      FOLIO_JINJA_ASSIGN_OR_RETURN(Value v, Eval(*node.operand, scope));
      if (node.op == ast::UnaryOp::kNot) return Value::Bool(!Truthy(v));
      if (v.is_undefined()) return UndefinedError(v);
      return node.op == ast::UnaryOp::kNeg ? Negate(v) : UnaryPlus(v);
    }
    case ExprKind::kBinary: {
      const auto& node = static_cast<const ast::Binary&>(expr);
      FOLIO_JINJA_ASSIGN_OR_RETURN(Value a, Eval(*node.left, scope));
      FOLIO_JINJA_ASSIGN_OR_RETURN(Value b, Eval(*node.right, scope));
      if (a.is_undefined()) return UndefinedError(a);
      if (b.is_undefined()) return UndefinedError(b);
      FOLIO_JINJA_ASSIGN_OR_RETURN(Value r, Arithmetic(node.op, a, b, options_.max_output_bytes));
      if (r.is_string()) FOLIO_JINJA_RETURN_IF_ERROR(ChargeBytes(r.str().size()));
      if (r.is_list()) FOLIO_JINJA_RETURN_IF_ERROR(Charge(static_cast<int64_t>(r.list().items.size() / 8)));
      return r;
    }
    case ExprKind::kAnd:
    case ExprKind::kOr: {
      const auto& node = static_cast<const ast::Binary&>(expr);
      FOLIO_JINJA_ASSIGN_OR_RETURN(Value a, Eval(*node.left, scope));
      if (Truthy(a) == (expr.kind == ExprKind::kOr)) return a;
      return Eval(*node.right, scope);
    }
    case ExprKind::kConcat: {
      std::string s;
      for (const auto& item : static_cast<const ast::Concat&>(expr).items) {
        FOLIO_JINJA_ASSIGN_OR_RETURN(Value v, Eval(*item, scope));
        FOLIO_JINJA_RETURN_IF_ERROR(AppendStr(&s, v));
        FOLIO_JINJA_RETURN_IF_ERROR(CheckOutput(s));
      }
      FOLIO_JINJA_RETURN_IF_ERROR(ChargeBytes(s.size()));
      return Value::String(std::move(s));
    }
    case ExprKind::kCompare: return EvalCompare(static_cast<const ast::Compare&>(expr), scope);
    case ExprKind::kCondExpr: {
      const auto& node = static_cast<const ast::CondExpr&>(expr);
      FOLIO_JINJA_ASSIGN_OR_RETURN(Value test, Eval(*node.test, scope));
      if (Truthy(test)) return Eval(*node.then, scope);
      if (node.otherwise) return Eval(*node.otherwise, scope);
      return Value::Undefined(Cat("the inline if-expression on line ", expr.line,
                                           " evaluated to false and no else section was defined."));
    }
    case ExprKind::kCall: return EvalCall(static_cast<const ast::Call&>(expr), scope);
    case ExprKind::kFilter: return EvalFilterChain(expr, nullptr, scope);
    case ExprKind::kTest: {
      const auto& node = static_cast<const ast::FilterTest&>(expr);
      FOLIO_JINJA_ASSIGN_OR_RETURN(Value operand, Eval(*node.operand, scope));
      FOLIO_JINJA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(node.args, scope));
      FOLIO_JINJA_ASSIGN_OR_RETURN(bool result, CallTest(node.name, operand, std::move(args)));
      return Value::Bool(result);
    }
  }
  return TemplateError("unknown expression");
}

absl::StatusOr<Value> Interpreter::EvalName(const ast::Name& node, const ScopePtr& scope) {
  if (const Value* v = scope->Find(node.name)) return *v;
  if (std::optional<Value> g = LookupGlobal(node.name)) return *std::move(g);
  std::string message;
  AppendStringRepr(&message, node.name);
  return Value::Undefined(Cat(message, " is undefined"));
}

absl::StatusOr<Value> Interpreter::EvalSubscript(const ast::Getitem& node, const ScopePtr& scope) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(Value obj, Eval(*node.object, scope));
  if (node.key->kind != ExprKind::kSlice) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(Value key, Eval(*node.key, scope));
    return GetItem(obj, key);
  }
  const auto& slice = static_cast<const ast::Slice&>(*node.key);
  Value bounds[3] = {Value::None(), Value::None(), Value::None()};
  const ast::ExprPtr* parts[3] = {&slice.start, &slice.stop, &slice.step};
  for (int i = 0; i < 3; ++i) {
    if (*parts[i]) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(bounds[i], Eval(**parts[i], scope));
    }
  }
  FOLIO_JINJA_ASSIGN_OR_RETURN(Value result, GetSlice(obj, bounds[0], bounds[1], bounds[2]));
  if (result.is_string()) FOLIO_JINJA_RETURN_IF_ERROR(ChargeBytes(result.str().size()));
  if (result.is_list()) FOLIO_JINJA_RETURN_IF_ERROR(Charge(static_cast<int64_t>(result.list().items.size() / 8)));
  return result;
}

absl::StatusOr<Value> Interpreter::EvalCompare(const ast::Compare& node, const ScopePtr& scope) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(Value left, Eval(*node.first, scope));
  for (const auto& [op, operand] : node.rest) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(Value right, Eval(*operand, scope));
    bool result = false;
    switch (op) {
      case ast::CompareOp::kEq: result = Equals(left, right); break;
      case ast::CompareOp::kNe: result = !Equals(left, right); break;
      case ast::CompareOp::kIn:
      case ast::CompareOp::kNotIn: {
        FOLIO_JINJA_ASSIGN_OR_RETURN(bool in, Contains(right, left));
        result = in == (op == ast::CompareOp::kIn);
        break;
      }
      default: {
        if (left.is_undefined()) return UndefinedError(left);
        if (right.is_undefined()) return UndefinedError(right);
        FOLIO_JINJA_ASSIGN_OR_RETURN(int c, Compare(left, right, CompareOpText(op)));
        if ((left.is_float() && std::isnan(left.as_double())) || (right.is_float() && std::isnan(right.as_double()))) {
          result = false;  // every ordering with NaN is false
        } else {
          result = op == ast::CompareOp::kLt   ? c < 0
                   : op == ast::CompareOp::kLe ? c <= 0
                   : op == ast::CompareOp::kGt ? c > 0
                                               : c >= 0;
        }
      }
    }
    if (!result) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

absl::StatusOr<CallArgs> Interpreter::EvalArgs(const ast::Args& args, const ScopePtr& scope) {
  CallArgs out;
  out.positional.reserve(args.positional.size());
  for (const auto& a : args.positional) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(Value v, Eval(*a, scope));
    out.positional.push_back(std::move(v));
  }
  for (const auto& [name, a] : args.keyword) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(Value v, Eval(*a, scope));
    out.keyword.emplace_back(name, std::move(v));
  }
  if (args.star) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(Value v, Eval(*args.star, scope));
    FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
    for (Value& item : items) out.positional.push_back(std::move(item));
  }
  if (args.star_star) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(Value v, Eval(*args.star_star, scope));
    if (!v.is_dict()) {
      return TemplateError(Cat("argument after ** must be a mapping, not ", TypeName(v)));
    }
    for (const auto& [k, item] : v.dict().entries()) {
      if (!k.is_string()) return TemplateError("keywords must be strings");
      out.keyword.emplace_back(k.str(), item);
    }
  }
  return out;
}

absl::StatusOr<Value> Interpreter::EvalFilterChain(const ast::Expr& expr, const Value* block_input,
                                                   const ScopePtr& scope) {
  if (expr.kind != ExprKind::kFilter) return Eval(expr, scope);
  const auto& node = static_cast<const ast::FilterTest&>(expr);
  Value input;
  if (node.operand != nullptr) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(input, EvalFilterChain(*node.operand, block_input, scope));
  } else {
    input = *block_input;
  }
  FOLIO_JINJA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(node.args, scope));
  FOLIO_JINJA_RETURN_IF_ERROR(AtLine(Charge(1), node.line));
  absl::StatusOr<Value> v = CallFilter(node.name, input, std::move(args));
  if (!v.ok()) return AtLine(v.status(), node.line);
  return v;
}

absl::StatusOr<Value> Interpreter::EvalCall(const ast::Call& node, const ScopePtr& scope) {
  Value callee;
  if (node.callee->kind == ExprKind::kGetattr) {
    // obj.method(...) without making a bound-method object.
    const auto& g = static_cast<const ast::Getattr&>(*node.callee);
    FOLIO_JINJA_ASSIGN_OR_RETURN(Value obj, Eval(*g.object, scope));
    if (FindMethod(obj, g.attr) == MethodAccess::kSafe) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(node.args, scope));
      FOLIO_JINJA_RETURN_IF_ERROR(Charge(1));
      return CallMethod(*this, obj, g.attr, args);
    }
    absl::StatusOr<Value> attr = GetAttribute(obj, g.attr);
    if (!attr.ok()) return AtLine(attr.status(), g.line);
    callee = *std::move(attr);
  } else {
    FOLIO_JINJA_ASSIGN_OR_RETURN(callee, Eval(*node.callee, scope));
  }
  FOLIO_JINJA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(node.args, scope));
  return Call(callee, std::move(args));
}

absl::StatusOr<Value> Interpreter::Call(const Value& callee, CallArgs args) {
  FOLIO_JINJA_RETURN_IF_ERROR(Charge(1));
  if (callee.is_undefined()) return UndefinedError(callee);
  if (callee.is_object()) {
    Object& obj = callee.object();
    switch (obj.kind()) {
      case Object::Kind::kMacro: return CallMacro(static_cast<const MacroObject&>(obj), std::move(args));
      case Object::Kind::kFunction: return static_cast<const FunctionObject&>(obj).Call(*this, args);
      case Object::Kind::kMethod: {
        const auto& m = static_cast<const MethodObject&>(obj);
        return CallMethod(*this, m.self(), m.name(), args);
      }
      case Object::Kind::kLoop: return CallLoop(static_cast<LoopObject&>(obj), std::move(args));
      case Object::Kind::kJoiner:
        if (!args.positional.empty() || !args.keyword.empty()) {
          return TemplateError("Joiner.__call__() takes 1 positional argument");
        }
        return Value::String(static_cast<JoinerObject&>(obj).Next());
      default: break;
    }
  }
  return TemplateError(Cat("'", TypeName(callee), "' object is not callable"));
}

absl::StatusOr<Value> Interpreter::CallFilter(std::string_view name, const Value& input, CallArgs args) {
  return ApplyFilter(*this, name, input, args);
}

absl::StatusOr<bool> Interpreter::CallTest(std::string_view name, const Value& input, CallArgs args) {
  return ApplyTest(*this, name, input, args);
}

absl::StatusOr<Value> Interpreter::CallMacro(const MacroObject& macro, CallArgs args) {
  const ast::Macro& node = macro.node();
  if (call_depth_ >= options_.max_depth) {
    return LimitError(Cat("macro calls nest deeper than max_depth (", options_.max_depth, ")"));
  }
  ScopePtr closure = macro.closure();
  auto scope = std::make_shared<Scope>(closure ? closure : root_);
  const size_t n = node.params.size();
  const size_t first_default = n - node.defaults.size();
  size_t given = std::min(args.positional.size(), n);
  for (size_t i = 0; i < given; ++i) scope->Set(node.params[i], args.positional[i]);
  // What positional arguments did not fill comes from keywords, then defaults
  // (evaluated in the macro's frame, after the parameters before them).
  std::vector<std::pair<std::string, Value>>& kwargs = args.keyword;
  for (size_t i = given; i < n; ++i) {
    auto it = std::find_if(kwargs.begin(), kwargs.end(), [&](const auto& kv) { return kv.first == node.params[i]; });
    if (it != kwargs.end()) {
      scope->Set(node.params[i], std::move(it->second));
      kwargs.erase(it);
    } else if (i >= first_default) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(Value d, Eval(*node.defaults[i - first_default], scope));
      scope->Set(node.params[i], std::move(d));
    } else {
      scope->Set(node.params[i], Value::Undefined(Cat("parameter '", node.params[i], "' was not provided")));
    }
  }
  if (node.uses_caller) {
    auto it = std::find_if(kwargs.begin(), kwargs.end(), [](const auto& kv) { return kv.first == "caller"; });
    if (it != kwargs.end()) {
      scope->Set("caller", std::move(it->second));
      kwargs.erase(it);
    } else {
      scope->Set("caller", Value::Undefined("No caller defined"));
    }
  }
  if (node.uses_kwargs) {
    auto dict = std::make_shared<DictData>();
    for (auto& [k, v] : kwargs) dict->Set(Value::String(k), std::move(v));
    scope->Set("kwargs", Value::Dict(std::move(dict)));
  } else if (!kwargs.empty()) {
    return TemplateError(Cat("macro '", node.name, "' takes no keyword argument '", kwargs.front().first, "'"));
  }
  if (node.uses_varargs) {
    std::vector<Value> rest;
    for (size_t i = n; i < args.positional.size(); ++i) rest.push_back(std::move(args.positional[i]));
    scope->Set("varargs", Value::Tuple(std::move(rest)));
  } else if (args.positional.size() > n) {
    return TemplateError(Cat("macro '", node.name, "' takes not more than ", n, " argument(s)"));
  }
  ++call_depth_;
  std::string out;
  absl::StatusOr<Flow> flow = ExecBody(node.body, scope, &out);
  --call_depth_;
  if (!flow.ok()) return flow.status();
  return Value::String(std::move(out));
}

absl::StatusOr<Value> Interpreter::CallLoop(LoopObject& loop, CallArgs args) {
  if (!loop.node()->recursive) {
    return TemplateError("The loop must have the 'recursive' marker to be called recursively.");
  }
  if (args.positional.size() != 1 || !args.keyword.empty()) {
    return TemplateError("loop() takes exactly one argument: the items to loop over");
  }
  if (call_depth_ >= options_.max_depth) {
    return LimitError(Cat("recursive loops nest deeper than max_depth (", options_.max_depth, ")"));
  }
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(args.positional[0]));
  ScopePtr scope = loop.scope();
  ++call_depth_;
  std::string out;
  absl::Status s = RunLoop(*loop.node(), std::move(items), scope ? scope : root_, loop.depth0() + 1, &out);
  --call_depth_;
  FOLIO_JINJA_RETURN_IF_ERROR(s);
  return Value::String(std::move(out));
}

}  // namespace folio::jinja
