#ifndef FOLIO_COMMON_JINJA_AST_H_
#define FOLIO_COMMON_JINJA_AST_H_

// The syntax tree the parser builds and the interpreter walks, after
// jinja2.nodes. Nodes are immutable once parsed; a Template owns its tree
// and renders may share it across threads.

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/jinja/operators.h"
#include "common/jinja/value.h"

namespace folio::jinja::ast {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// ---- expressions ----

enum class ExprKind {
  kConst, kName, kList, kTuple, kDict, kGetattr, kGetitem, kSlice, kUnary, kBinary,
  kAnd, kOr, kConcat, kCompare, kCondExpr, kCall, kFilter, kTest
};

struct Expr {
  Expr(ExprKind k, int l) : kind(k), line(l) {}
  virtual ~Expr() = default;
  const ExprKind kind;
  const int line;
};

// Arguments of a call, filter or test: f(a, b, k=v, *args, **kwargs).
struct Args {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star;        // *args
  ExprPtr star_star;   // **kwargs
};

struct Const : Expr {
  Const(int l, Value v) : Expr(ExprKind::kConst, l), value(std::move(v)) {}
  Value value;  // scalars only (never a container: those are built per use)
};
struct Name : Expr {
  Name(int l, std::string n) : Expr(ExprKind::kName, l), name(std::move(n)) {}
  std::string name;
};
struct Sequence : Expr {  // kList or kTuple
  Sequence(ExprKind k, int l) : Expr(k, l) {}
  std::vector<ExprPtr> items;
};
struct DictLit : Expr {
  explicit DictLit(int l) : Expr(ExprKind::kDict, l) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};
struct Getattr : Expr {
  Getattr(int l, ExprPtr o, std::string a)
      : Expr(ExprKind::kGetattr, l), object(std::move(o)), attr(std::move(a)) {}
  ExprPtr object;
  std::string attr;
};
struct Getitem : Expr {
  Getitem(int l, ExprPtr o, ExprPtr k) : Expr(ExprKind::kGetitem, l), object(std::move(o)), key(std::move(k)) {}
  ExprPtr object;
  ExprPtr key;  // may be a Slice
};
struct Slice : Expr {
  explicit Slice(int l) : Expr(ExprKind::kSlice, l) {}
  ExprPtr start, stop, step;  // each optional
};
enum class UnaryOp { kNot, kNeg, kPos };
struct Unary : Expr {
  Unary(int l, UnaryOp o, ExprPtr e) : Expr(ExprKind::kUnary, l), op(o), operand(std::move(e)) {}
  UnaryOp op;
  ExprPtr operand;
};
struct Binary : Expr {  // arithmetic; kAnd / kOr use it too
  Binary(ExprKind k, int l, BinaryOp o, ExprPtr a, ExprPtr b)
      : Expr(k, l), op(o), left(std::move(a)), right(std::move(b)) {}
  BinaryOp op;
  ExprPtr left, right;
};
struct Concat : Expr {
  explicit Concat(int l) : Expr(ExprKind::kConcat, l) {}
  std::vector<ExprPtr> items;
};
enum class CompareOp { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };
struct Compare : Expr {
  explicit Compare(int l) : Expr(ExprKind::kCompare, l) {}
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;  // a < b < c
};
struct CondExpr : Expr {
  explicit CondExpr(int l) : Expr(ExprKind::kCondExpr, l) {}
  ExprPtr test, then, otherwise;  // otherwise optional (undefined)
};
struct Call : Expr {
  explicit Call(int l) : Expr(ExprKind::kCall, l) {}
  ExprPtr callee;
  Args args;
};
struct FilterTest : Expr {  // kFilter or kTest
  FilterTest(ExprKind k, int l) : Expr(k, l) {}
  ExprPtr operand;  // null for a filter block's filter: the body is the input
  std::string name;
  Args args;
};

// ---- statements ----

enum class StmtKind {
  kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kCallBlock, kFilterBlock, kWith,
  kBreak, kContinue, kScopeBlock
};

struct Stmt {
  Stmt(StmtKind k, int l) : kind(k), line(l) {}
  virtual ~Stmt() = default;
  const StmtKind kind;
  const int line;
};

// One piece of output: literal text, or an expression to print.
struct OutputPart {
  std::string text;
  ExprPtr expr;  // when set, printed instead of text
};
struct Output : Stmt {
  explicit Output(int l) : Stmt(StmtKind::kOutput, l) {}
  std::vector<OutputPart> parts;
};
struct If : Stmt {
  explicit If(int l) : Stmt(StmtKind::kIf, l) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, elif…
  Body otherwise;
};

// Where an assignment or a loop stores: a name, ns.attr, or a (nested)
// tuple of names.
struct Target {
  enum class Kind { kName, kNamespaceAttr, kTuple };
  Kind kind = Kind::kName;
  std::string name;
  std::string attr;
  std::vector<Target> items;
  int line = 0;
};

struct For : Stmt {
  explicit For(int l) : Stmt(StmtKind::kFor, l) {}
  Target target;
  ExprPtr iter;
  ExprPtr filter;  // `for x in y if cond`
  bool recursive = false;
  Body body;
  Body otherwise;
};
struct Set : Stmt {
  explicit Set(int l) : Stmt(StmtKind::kSet, l) {}
  Target target;
  ExprPtr value;
};
struct SetBlock : Stmt {
  explicit SetBlock(int l) : Stmt(StmtKind::kSetBlock, l) {}
  Target target;
  ExprPtr filter;  // FilterTest chain with a null innermost operand, optional
  Body body;
};
struct Macro : Stmt {
  explicit Macro(int l) : Stmt(StmtKind::kMacro, l) {}
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // for the last defaults.size() params
  bool uses_varargs = false;
  bool uses_kwargs = false;
  bool uses_caller = false;
  Body body;
};
struct CallBlock : Stmt {
  explicit CallBlock(int l) : Stmt(StmtKind::kCallBlock, l) {}
  std::unique_ptr<Call> call;
  Macro caller{0};  // the body, as the `caller` macro
};
struct FilterBlock : Stmt {
  explicit FilterBlock(int l) : Stmt(StmtKind::kFilterBlock, l) {}
  ExprPtr filter;  // FilterTest chain with a null innermost operand
  Body body;
};
struct With : Stmt {
  explicit With(int l) : Stmt(StmtKind::kWith, l) {}
  std::vector<std::pair<Target, ExprPtr>> assignments;
  Body body;
};
// A body rendered in place in a frame of its own: {% generation %} (which
// AssistantTracker only marks) and {% block %} (a single template has no
// inheritance; an unscoped block sees only the top-level frame).
struct ScopeBlock : Stmt {
  explicit ScopeBlock(int l) : Stmt(StmtKind::kScopeBlock, l) {}
  Body body;
  bool top_level_frame = false;  // unscoped {% block %}
  std::string required_block;    // {% block x required %}: rendering fails
};
struct LoopControl : Stmt {  // kBreak / kContinue
  LoopControl(StmtKind k, int l) : Stmt(k, l) {}
};

}  // namespace folio::jinja::ast

#endif  // FOLIO_COMMON_JINJA_AST_H_
