#include "common/jinja/ast_walk.h"

#include "common/jinja/errors.h"

namespace folio::jinja::ast {
namespace {

absl::Status WalkStmt(const Stmt& s, bool soft, const ExprVisitor& fn);

}  // namespace

absl::Status WalkExpr(const Expr* e, bool soft, const ExprVisitor& fn) {
  if (e == nullptr) return absl::OkStatus();
  FOLIO_JINJA_RETURN_IF_ERROR(fn(*e, soft));
  auto walk_args = [&](const Args& args, bool s) -> absl::Status {
    for (const auto& a : args.positional) FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(a.get(), s, fn));
    for (const auto& [k, a] : args.keyword) FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(a.get(), s, fn));
    FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(args.star.get(), s, fn));
    return WalkExpr(args.star_star.get(), s, fn);
  };
  switch (e->kind) {
    case ExprKind::kConst:
    case ExprKind::kName: return absl::OkStatus();
    case ExprKind::kList:
    case ExprKind::kTuple:
      for (const auto& item : static_cast<const Sequence*>(e)->items) {
        FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(item.get(), soft, fn));
      }
      return absl::OkStatus();
    case ExprKind::kDict:
      for (const auto& [k, v] : static_cast<const DictLit*>(e)->items) {
        FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(k.get(), soft, fn));
        FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(v.get(), soft, fn));
      }
      return absl::OkStatus();
    case ExprKind::kGetattr: return WalkExpr(static_cast<const Getattr*>(e)->object.get(), soft, fn);
    case ExprKind::kGetitem: {
      auto* g = static_cast<const Getitem*>(e);
      FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(g->object.get(), soft, fn));
      return WalkExpr(g->key.get(), soft, fn);
    }
    case ExprKind::kSlice: {
      auto* s = static_cast<const Slice*>(e);
      FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(s->start.get(), soft, fn));
      FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(s->stop.get(), soft, fn));
      return WalkExpr(s->step.get(), soft, fn);
    }
    case ExprKind::kUnary: return WalkExpr(static_cast<const Unary*>(e)->operand.get(), soft, fn);
    case ExprKind::kBinary:
    case ExprKind::kAnd:
    case ExprKind::kOr: {
      auto* b = static_cast<const Binary*>(e);
      FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(b->left.get(), soft, fn));
      return WalkExpr(b->right.get(), soft, fn);
    }
    case ExprKind::kConcat:
      for (const auto& item : static_cast<const Concat*>(e)->items) {
        FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(item.get(), soft, fn));
      }
      return absl::OkStatus();
    case ExprKind::kCompare: {
      auto* c = static_cast<const Compare*>(e);
      FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(c->first.get(), soft, fn));
      for (const auto& [op, operand] : c->rest) FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(operand.get(), soft, fn));
      return absl::OkStatus();
    }
    case ExprKind::kCondExpr: {
      auto* c = static_cast<const CondExpr*>(e);
      FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(c->test.get(), true, fn));
      FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(c->then.get(), true, fn));
      return WalkExpr(c->otherwise.get(), true, fn);
    }
    case ExprKind::kCall: {
      auto* c = static_cast<const Call*>(e);
      FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(c->callee.get(), soft, fn));
      return walk_args(c->args, soft);
    }
    case ExprKind::kFilter:
    case ExprKind::kTest: {
      auto* f = static_cast<const FilterTest*>(e);
      FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(f->operand.get(), soft, fn));
      return walk_args(f->args, soft);
    }
  }
  return absl::OkStatus();
}

namespace {

absl::Status WalkStmt(const Stmt& s, bool soft, const ExprVisitor& fn) {
  switch (s.kind) {
    case StmtKind::kOutput:
      for (const auto& part : static_cast<const Output&>(s).parts) {
        FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(part.expr.get(), soft, fn));
      }
      return absl::OkStatus();
    case StmtKind::kIf: {
      const auto& n = static_cast<const If&>(s);
      for (const auto& [test, body] : n.branches) {
        FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(test.get(), true, fn));
        FOLIO_JINJA_RETURN_IF_ERROR(WalkBody(body, true, fn));
      }
      return WalkBody(n.otherwise, true, fn);
    }
    case StmtKind::kFor: {
      const auto& n = static_cast<const For&>(s);
      FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(n.iter.get(), soft, fn));
      FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(n.filter.get(), false, fn));
      FOLIO_JINJA_RETURN_IF_ERROR(WalkBody(n.body, false, fn));
      return WalkBody(n.otherwise, false, fn);
    }
    case StmtKind::kSet: return WalkExpr(static_cast<const Set&>(s).value.get(), soft, fn);
    case StmtKind::kSetBlock: {
      const auto& n = static_cast<const SetBlock&>(s);
      FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(n.filter.get(), false, fn));
      return WalkBody(n.body, false, fn);
    }
    case StmtKind::kMacro: {
      const auto& n = static_cast<const Macro&>(s);
      for (const auto& d : n.defaults) FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(d.get(), false, fn));
      return WalkBody(n.body, false, fn);
    }
    case StmtKind::kCallBlock: {
      const auto& n = static_cast<const CallBlock&>(s);
      FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(n.call.get(), soft, fn));
      for (const auto& d : n.caller.defaults) FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(d.get(), false, fn));
      return WalkBody(n.caller.body, false, fn);
    }
    case StmtKind::kFilterBlock: {
      const auto& n = static_cast<const FilterBlock&>(s);
      FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(n.filter.get(), false, fn));
      return WalkBody(n.body, false, fn);
    }
    case StmtKind::kWith: {
      const auto& n = static_cast<const With&>(s);
      for (const auto& [t, v] : n.assignments) FOLIO_JINJA_RETURN_IF_ERROR(WalkExpr(v.get(), soft, fn));
      return WalkBody(n.body, false, fn);
    }
    case StmtKind::kScopeBlock: return WalkBody(static_cast<const ScopeBlock&>(s).body, soft, fn);
    case StmtKind::kBreak:
    case StmtKind::kContinue: return absl::OkStatus();
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WalkBody(const Body& body, bool soft, const ExprVisitor& fn) {
  for (const auto& s : body) FOLIO_JINJA_RETURN_IF_ERROR(WalkStmt(*s, soft, fn));
  return absl::OkStatus();
}


}  // namespace folio::jinja::ast
