#include "common/jinja/interpreter.h"

#include <utility>

#include "common/jinja/attributes.h"
#include "common/jinja/builtins.h"
#include "common/jinja/cat.h"
#include "common/jinja/errors.h"
#include "common/jinja/operators.h"
#include "common/jinja/py_format.h"

namespace folio::jinja {
namespace {

using ast::ExprKind;
using ast::StmtKind;

// Nesting of JSON accepted in the context.
constexpr int kMaxContextDepth = kMaxPrintDepth;

}  // namespace

Interpreter::~Interpreter() {
  // Namespaces can hold themselves (ns.x = ns); clearing them all breaks
  // such cycles so nothing outlives the render.
  for (auto& weak : namespaces_) {
    if (std::shared_ptr<NamespaceObject> ns = weak.lock()) ns->attrs().Clear();
  }
}

std::shared_ptr<NamespaceObject> Interpreter::NewNamespace() {
  auto ns = std::make_shared<NamespaceObject>();
  namespaces_.push_back(ns);
  return ns;
}

absl::Status Interpreter::Charge(int64_t steps) {
  steps_ += steps;
  if (steps_ > options_.max_steps) {
    return LimitError(Cat("the template ran past max_steps (", options_.max_steps, " evaluation steps)"));
  }
  return absl::OkStatus();
}

absl::Status Interpreter::CheckOutput(const std::string& out) const {
  if (static_cast<int64_t>(out.size()) > options_.max_output_bytes) {
    return LimitError(Cat("the output passed max_output_bytes (", options_.max_output_bytes, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Interpreter::Render(const ast::Body& body, const nlohmann::ordered_json& context) {
  auto context_scope = std::make_shared<Scope>(nullptr);
  if (!context.is_object() && !context.is_null()) {
    return TemplateError("the render context must be a JSON object");
  }
  if (context.is_object()) {
    for (auto it = context.begin(); it != context.end(); ++it) {
      FOLIO_JINJA_ASSIGN_OR_RETURN(Value v, Value::FromJson(it.value(), kMaxContextDepth));
      context_scope->Set(it.key(), std::move(v));
    }
  }
  root_ = std::make_shared<Scope>(std::move(context_scope));
  ScopedFormatLimit format_limit(options_.max_output_bytes);
  std::string out;
  FOLIO_JINJA_ASSIGN_OR_RETURN(Flow flow, ExecBody(body, root_, &out));
  (void)flow;
  return out;
}

// ---- statements ----

absl::StatusOr<Interpreter::Flow> Interpreter::ExecBody(const ast::Body& body, const ScopePtr& scope,
                                                        std::string* out) {
  for (const auto& stmt : body) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(Flow flow, Exec(*stmt, scope, out));
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

absl::StatusOr<Interpreter::Flow> Interpreter::Exec(const ast::Stmt& stmt, const ScopePtr& scope,
                                                    std::string* out) {
  FOLIO_JINJA_RETURN_IF_ERROR(AtLine(Charge(1), stmt.line));
  if (eval_depth_ >= options_.max_depth * kNestingPerDepth) {
    return AtLine(LimitError(Cat("the template nests deeper than max_depth (", options_.max_depth, ")")),
                  stmt.line);
  }
  ++eval_depth_;
  absl::Status status;
  Flow flow = Flow::kNormal;
  switch (stmt.kind) {
    case StmtKind::kOutput: status = ExecOutput(static_cast<const ast::Output&>(stmt), scope, out); break;
    case StmtKind::kIf: {
      absl::StatusOr<Flow> f = ExecIf(static_cast<const ast::If&>(stmt), scope, out);
      if (f.ok()) {
        flow = *f;
      } else {
        status = f.status();
      }
      break;
    }
    case StmtKind::kFor: status = ExecFor(static_cast<const ast::For&>(stmt), scope, out); break;
    case StmtKind::kSet: {
      const auto& node = static_cast<const ast::Set&>(stmt);
      absl::StatusOr<Value> v = Eval(*node.value, scope);
      status = v.ok() ? Assign(node.target, *std::move(v), scope) : v.status();
      break;
    }
    case StmtKind::kSetBlock: status = ExecSetBlock(static_cast<const ast::SetBlock&>(stmt), scope); break;
    case StmtKind::kMacro: {
      const auto& node = static_cast<const ast::Macro&>(stmt);
      scope->Set(node.name, Value::FromObject(std::make_shared<MacroObject>(&node, scope)));
      break;
    }
    case StmtKind::kCallBlock: status = ExecCallBlock(static_cast<const ast::CallBlock&>(stmt), scope, out); break;
    case StmtKind::kFilterBlock:
      status = ExecFilterBlock(static_cast<const ast::FilterBlock&>(stmt), scope, out);
      break;
    case StmtKind::kWith: status = ExecWith(static_cast<const ast::With&>(stmt), scope, out); break;
    case StmtKind::kScopeBlock: {
      const auto& node = static_cast<const ast::ScopeBlock&>(stmt);
      if (!node.required_block.empty()) {
        status = TemplateError(Cat("Required block '", node.required_block, "' not found"));
        break;
      }
      absl::StatusOr<Flow> f =
          ExecBody(node.body, std::make_shared<Scope>(node.top_level_frame ? root_ : scope), out);
      if (f.ok()) {
        flow = *f;
      } else {
        status = f.status();
      }
      break;
    }
    case StmtKind::kBreak: flow = Flow::kBreak; break;
    case StmtKind::kContinue: flow = Flow::kContinue; break;
  }
  --eval_depth_;
  if (!status.ok()) return AtLine(std::move(status), stmt.line);
  return flow;
}

absl::Status Interpreter::ExecOutput(const ast::Output& node, const ScopePtr& scope, std::string* out) {
  for (const ast::OutputPart& part : node.parts) {
    if (part.expr == nullptr) {
      out->append(part.text);
    } else {
      FOLIO_JINJA_ASSIGN_OR_RETURN(Value v, Eval(*part.expr, scope));
      FOLIO_JINJA_RETURN_IF_ERROR(AtLine(AppendStr(out, v), part.expr->line));
    }
    FOLIO_JINJA_RETURN_IF_ERROR(CheckOutput(*out));
  }
  return absl::OkStatus();
}

absl::StatusOr<Interpreter::Flow> Interpreter::ExecIf(const ast::If& node, const ScopePtr& scope,
                                                      std::string* out) {
  for (const auto& [test, body] : node.branches) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(Value v, Eval(*test, scope));
    if (Truthy(v)) return ExecBody(body, scope, out);
  }
  return ExecBody(node.otherwise, scope, out);
}

absl::Status Interpreter::ExecFor(const ast::For& node, const ScopePtr& scope, std::string* out) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(Value iterable, Eval(*node.iter, scope));
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(iterable));
  return RunLoop(node, std::move(items), scope, 0, out);
}

absl::Status Interpreter::RunLoop(const ast::For& node, std::vector<Value> items, const ScopePtr& scope,
                                  int depth0, std::string* out) {
  FOLIO_JINJA_RETURN_IF_ERROR(Charge(static_cast<int64_t>(items.size() / 16)));
  if (node.filter != nullptr) {
    // `for x in xs if cond`: the loop (and loop.length) sees the kept items.
    std::vector<Value> kept;
    for (Value& item : items) {
      FOLIO_JINJA_RETURN_IF_ERROR(Charge(1));
      auto test_scope = std::make_shared<Scope>(scope);
      FOLIO_JINJA_RETURN_IF_ERROR(Assign(node.target, item, test_scope));
      FOLIO_JINJA_ASSIGN_OR_RETURN(Value keep, Eval(*node.filter, test_scope));
      if (Truthy(keep)) kept.push_back(std::move(item));
    }
    ReleaseValues(&items);
    items = std::move(kept);
  }
  if (items.empty()) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(Flow flow, ExecBody(node.otherwise, std::make_shared<Scope>(scope), out));
    (void)flow;
    return absl::OkStatus();
  }
  auto loop = std::make_shared<LoopObject>(std::move(items), depth0, &node, scope);
  const Value loop_value = Value::FromObject(loop);
  const size_t n = loop->items().size();
  for (size_t i = 0; i < n; ++i) {
    FOLIO_JINJA_RETURN_IF_ERROR(AtLine(Charge(1), node.line));
    loop->set_index0(static_cast<int64_t>(i));
    auto iteration = std::make_shared<Scope>(scope);
    FOLIO_JINJA_RETURN_IF_ERROR(AtLine(Assign(node.target, loop->items()[i], iteration), node.line));
    iteration->Set("loop", loop_value);
    FOLIO_JINJA_ASSIGN_OR_RETURN(Flow flow, ExecBody(node.body, iteration, out));
    if (flow == Flow::kBreak) break;
  }
  return absl::OkStatus();
}

absl::Status Interpreter::Assign(const ast::Target& target, Value value, const ScopePtr& scope) {
  switch (target.kind) {
    case ast::Target::Kind::kName: scope->Set(target.name, std::move(value)); return absl::OkStatus();
    case ast::Target::Kind::kNamespaceAttr: {
      const Value* ns = scope->Find(target.name);
      if (ns == nullptr || !ns->is_object() || ns->object().kind() != Object::Kind::kNamespace) {
        return AtLine(TemplateError("cannot assign attribute on non-namespace object"), target.line);
      }
      static_cast<NamespaceObject&>(ns->object()).attrs().Set(Value::String(target.attr), std::move(value));
      return absl::OkStatus();
    }
    case ast::Target::Kind::kTuple: {
      if (!value.is_list() && !value.is_dict() && !value.is_string() && !value.is_object()) {
        return AtLine(TemplateError(Cat("cannot unpack non-iterable ", TypeName(value), " object")),
                      target.line);
      }
      absl::StatusOr<std::vector<Value>> unpacked = Iterate(value);
      if (!unpacked.ok()) return AtLine(unpacked.status(), target.line);
      std::vector<Value> items = *std::move(unpacked);
      const size_t want = target.items.size();
      if (items.size() > want) {
        return AtLine(TemplateError(Cat("too many values to unpack (expected ", want, ")")), target.line);
      }
      if (items.size() < want) {
        return AtLine(TemplateError(Cat("not enough values to unpack (expected ", want, ", got ",
                                                 items.size(), ")")),
                      target.line);
      }
      for (size_t i = 0; i < want; ++i) {
        FOLIO_JINJA_RETURN_IF_ERROR(Assign(target.items[i], std::move(items[i]), scope));
      }
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Interpreter::Capture(const ast::Body& body, const ScopePtr& scope) {
  std::string buffer;
  FOLIO_JINJA_ASSIGN_OR_RETURN(Flow flow, ExecBody(body, std::make_shared<Scope>(scope), &buffer));
  (void)flow;
  return buffer;
}

absl::Status Interpreter::ExecSetBlock(const ast::SetBlock& node, const ScopePtr& scope) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string text, Capture(node.body, scope));
  Value value = Value::String(std::move(text));
  if (node.filter != nullptr) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(value, EvalFilterChain(*node.filter, &value, scope));
  }
  return Assign(node.target, std::move(value), scope);
}

absl::Status Interpreter::ExecCallBlock(const ast::CallBlock& node, const ScopePtr& scope, std::string* out) {
  const ast::Call& call = *node.call;
  Value callee;
  if (call.callee->kind == ExprKind::kGetattr) {
    const auto& g = static_cast<const ast::Getattr&>(*call.callee);
    FOLIO_JINJA_ASSIGN_OR_RETURN(Value obj, Eval(*g.object, scope));
    absl::StatusOr<Value> method = GetAttribute(obj, g.attr);
    if (!method.ok()) return AtLine(method.status(), g.line);
    callee = *std::move(method);
  } else {
    FOLIO_JINJA_ASSIGN_OR_RETURN(callee, Eval(*call.callee, scope));
  }
  FOLIO_JINJA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(call.args, scope));
  args.keyword.emplace_back("caller", Value::FromObject(std::make_shared<MacroObject>(&node.caller, scope)));
  absl::StatusOr<Value> result = Call(callee, std::move(args));
  if (!result.ok()) return AtLine(result.status(), call.line);
  FOLIO_JINJA_RETURN_IF_ERROR(AppendStr(out, *result));
  return CheckOutput(*out);
}

absl::Status Interpreter::ExecFilterBlock(const ast::FilterBlock& node, const ScopePtr& scope, std::string* out) {
  FOLIO_JINJA_ASSIGN_OR_RETURN(std::string text, Capture(node.body, scope));
  Value input = Value::String(std::move(text));
  FOLIO_JINJA_ASSIGN_OR_RETURN(Value v, EvalFilterChain(*node.filter, &input, scope));
  FOLIO_JINJA_RETURN_IF_ERROR(AppendStr(out, v));
  return CheckOutput(*out);
}

absl::Status Interpreter::ExecWith(const ast::With& node, const ScopePtr& scope, std::string* out) {
  auto inner = std::make_shared<Scope>(scope);
  for (const auto& [target, expr] : node.assignments) {
    FOLIO_JINJA_ASSIGN_OR_RETURN(Value v, Eval(*expr, scope));
    FOLIO_JINJA_RETURN_IF_ERROR(Assign(target, std::move(v), inner));
  }
  FOLIO_JINJA_ASSIGN_OR_RETURN(Flow flow, ExecBody(node.body, inner, out));
  (void)flow;
  return absl::OkStatus();
}

}  // namespace folio::jinja
