#ifndef FOLIO_COMMON_JINJA_INTERPRETER_H_
#define FOLIO_COMMON_JINJA_INTERPRETER_H_

// Walks a parsed template for one render. Scoping as jinja compiles it:
// loop iterations, macro calls and set/filter/with blocks get fresh frames,
// if-statements do not; macros see the frame they were defined in (at call
// time). Attribute and item access go through attributes.h (the sandbox's
// getattr/getitem), names fall back to the context, then the globals.
//
// Every expression evaluation, statement, loop iteration and call costs a
// step, and bulk work (copies, joins, sorts, formatting) costs in proportion;
// past max_steps, output past max_output_bytes, or macro / recursive-loop
// calls (or evaluation nesting) past max_depth stop the render with
// RESOURCE_EXHAUSTED.
//
// Thread-safety: one Interpreter per render, on one thread; the tree it
// walks is shared read-only.
//
// interpreter.cc holds the statements, interpreter_expr.cc the expressions
// and calls.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/jinja/ast.h"
#include "common/jinja/objects.h"
#include "common/jinja/scope.h"
#include "common/jinja/template.h"
#include "common/jinja/value.h"
#include "nlohmann/json.hpp"

namespace folio::jinja {

class Interpreter {
 public:
  // Statement and expression evaluation may nest this many times max_depth
  // (across macro calls) before RESOURCE_EXHAUSTED: at the limit a render
  // needs well under 1 MiB of stack (jinja_limits_test checks it on a 1 MiB thread).
  static constexpr int kNestingPerDepth = 8;

  explicit Interpreter(const TemplateOptions& options) : options_(options) {}
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;
  ~Interpreter();

  absl::StatusOr<std::string> Render(const ast::Body& body, const nlohmann::ordered_json& context);

  // ---- for builtins ----
  absl::StatusOr<Value> Call(const Value& callee, CallArgs args);
  absl::StatusOr<Value> CallFilter(std::string_view name, const Value& input, CallArgs args);
  absl::StatusOr<bool> CallTest(std::string_view name, const Value& input, CallArgs args);
  // Adds `steps` of work; RESOURCE_EXHAUSTED past max_steps.
  absl::Status Charge(int64_t steps);
  // Work proportional to a size in bytes (copies, formatting).
  absl::Status ChargeBytes(size_t bytes) { return Charge(static_cast<int64_t>(bytes / 64)); }
  int64_t max_output_bytes() const { return options_.max_output_bytes; }
  // A namespace() whose attributes are cleared when the render ends, so that
  // reference cycles through namespaces cannot leak.
  std::shared_ptr<NamespaceObject> NewNamespace();

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using ScopePtr = std::shared_ptr<Scope>;

  absl::StatusOr<Flow> ExecBody(const ast::Body& body, const ScopePtr& scope, std::string* out);
  absl::StatusOr<Flow> Exec(const ast::Stmt& stmt, const ScopePtr& scope, std::string* out);
  absl::Status ExecOutput(const ast::Output& node, const ScopePtr& scope, std::string* out);
  absl::StatusOr<Flow> ExecIf(const ast::If& node, const ScopePtr& scope, std::string* out);
  absl::Status ExecFor(const ast::For& node, const ScopePtr& scope, std::string* out);
  absl::Status RunLoop(const ast::For& node, std::vector<Value> items, const ScopePtr& scope, int depth0,
                       std::string* out);
  absl::Status ExecSetBlock(const ast::SetBlock& node, const ScopePtr& scope);
  absl::Status ExecCallBlock(const ast::CallBlock& node, const ScopePtr& scope, std::string* out);
  absl::Status ExecFilterBlock(const ast::FilterBlock& node, const ScopePtr& scope, std::string* out);
  absl::Status ExecWith(const ast::With& node, const ScopePtr& scope, std::string* out);
  absl::Status Assign(const ast::Target& target, Value value, const ScopePtr& scope);
  // Renders body in a child frame into a new string.
  absl::StatusOr<std::string> Capture(const ast::Body& body, const ScopePtr& scope);
  absl::Status CheckOutput(const std::string& out) const;

  absl::StatusOr<Value> Eval(const ast::Expr& expr, const ScopePtr& scope);
  absl::StatusOr<Value> EvalInner(const ast::Expr& expr, const ScopePtr& scope);
  absl::StatusOr<Value> EvalName(const ast::Name& node, const ScopePtr& scope);
  absl::StatusOr<Value> EvalCompare(const ast::Compare& node, const ScopePtr& scope);
  absl::StatusOr<Value> EvalCall(const ast::Call& node, const ScopePtr& scope);
  absl::StatusOr<Value> EvalFilterChain(const ast::Expr& expr, const Value* block_input, const ScopePtr& scope);
  absl::StatusOr<Value> EvalSubscript(const ast::Getitem& node, const ScopePtr& scope);
  absl::StatusOr<CallArgs> EvalArgs(const ast::Args& args, const ScopePtr& scope);

  absl::StatusOr<Value> CallMacro(const MacroObject& macro, CallArgs args);
  absl::StatusOr<Value> CallLoop(LoopObject& loop, CallArgs args);

  const TemplateOptions options_;
  int64_t steps_ = 0;
  int32_t call_depth_ = 0;
  int32_t eval_depth_ = 0;
  ScopePtr root_;
  std::vector<std::weak_ptr<NamespaceObject>> namespaces_;
};

}  // namespace folio::jinja

#endif  // FOLIO_COMMON_JINJA_INTERPRETER_H_
