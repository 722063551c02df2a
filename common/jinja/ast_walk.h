#ifndef FOLIO_COMMON_JINJA_AST_WALK_H_
#define FOLIO_COMMON_JINJA_AST_WALK_H_

// A visit of every expression of a parsed body, telling whether jinja's
// compiler would be in a "soft" frame there (inside an if-statement or a
// conditional expression, and not reset by a loop, macro or block body):
// it decides whether an unknown filter or test fails at compile time.

#include <functional>

#include "absl/status/status.h"
#include "common/jinja/ast.h"

namespace folio::jinja::ast {

using ExprVisitor = std::function<absl::Status(const Expr&, bool soft)>;

// Stops at, and returns, the first error fn returns.
absl::Status WalkBody(const Body& body, bool soft, const ExprVisitor& fn);
absl::Status WalkExpr(const Expr* expr, bool soft, const ExprVisitor& fn);

}  // namespace folio::jinja::ast

#endif  // FOLIO_COMMON_JINJA_AST_WALK_H_
