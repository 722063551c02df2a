#ifndef FOLIO_COMMON_JINJA_EXPRESSION_PARSER_H_
#define FOLIO_COMMON_JINJA_EXPRESSION_PARSER_H_

// The token stream and the expression grammar of jinja2.parser: conditional
// expressions, or/and/not, chained comparisons, + - ~ * / // % and a
// left-associative **, unary minus whose operand is filtered (`-x|abs`),
// postfix access and calls, filters, tests with one bare argument, and
// assignment targets. Parser (parser.h) adds the statements on top.
//
// Every recursive descent passes a depth guard: nesting deeper than
// max_depth fails instead of exhausting the stack.
//
// Thread-safety: one parse, one thread.

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/jinja/ast.h"
#include "common/jinja/lexer.h"

namespace folio::jinja {

class ExpressionParser {
 public:
  ExpressionParser(std::vector<Token> tokens, int max_depth);
  ExpressionParser(const ExpressionParser&) = delete;
  ExpressionParser& operator=(const ExpressionParser&) = delete;

 protected:
  using Type = Token::Type;
  using Ends = std::initializer_list<std::string_view>;

  class DepthGuard {
   public:
    explicit DepthGuard(ExpressionParser* p) : p_(p) { ++p_->depth_; }
    ~DepthGuard() { --p_->depth_; }
    bool too_deep() const { return p_->depth_ > p_->max_depth_; }

   private:
    ExpressionParser* p_;
  };

  // ---- the token stream ----
  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Look() const { return tokens_[pos_ + 1 < tokens_.size() ? pos_ + 1 : pos_]; }
  void Advance() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool IsOp(std::string_view op) const { return Cur().type == Type::kOperator && Cur().value == op; }
  bool IsName(std::string_view name) const { return Cur().type == Type::kName && Cur().value == name; }
  bool SkipOp(std::string_view op);
  bool SkipName(std::string_view name);
  static std::string Describe(const Token& t);

  absl::Status Fail(std::string_view what) { return Fail(what, Cur().line); }
  absl::Status Fail(std::string_view what, int line);
  absl::Status TooDeep();
  absl::Status UnexpectedHere(std::string_view expected);
  absl::Status ExpectOp(std::string_view op);
  absl::Status ExpectType(Type type, std::string_view what);
  absl::StatusOr<std::string> ExpectName();
  absl::Status ExpectKeyword(std::string_view name);

  // ---- expressions (names after jinja2.parser's parse_* methods) ----
  absl::StatusOr<ast::Target> ParseAssignTarget(bool with_namespace, bool name_only, Ends extra_end);
  absl::StatusOr<ast::ExprPtr> ParseTuple(bool simplified, bool with_condexpr, Ends extra_end,
                                          bool explicit_parens);
  absl::StatusOr<ast::ExprPtr> ParseExpression(bool with_condexpr);
  // A filter chain; start_inline: the first filter has no leading '|'
  // (filter blocks). node is null for block filters.
  absl::StatusOr<ast::ExprPtr> ParseFilter(ast::ExprPtr node, bool start_inline);

  const int max_depth_;

 private:
  absl::StatusOr<ast::Target> ToTarget(const ast::Expr& e);
  bool IsTupleEnd(Ends extra_end) const;
  absl::StatusOr<ast::ExprPtr> ParseOr();
  absl::StatusOr<ast::ExprPtr> ParseAnd();
  absl::StatusOr<ast::ExprPtr> ParseNot();
  absl::StatusOr<ast::ExprPtr> ParseCompare();
  absl::StatusOr<ast::ExprPtr> ParseMath1();
  absl::StatusOr<ast::ExprPtr> ParseConcat();
  absl::StatusOr<ast::ExprPtr> ParseMath2();
  absl::StatusOr<ast::ExprPtr> ParsePow();
  absl::StatusOr<ast::ExprPtr> ParseUnary(bool with_filter);
  absl::StatusOr<ast::ExprPtr> ParsePrimary();
  absl::StatusOr<ast::ExprPtr> ParsePostfix(ast::ExprPtr node);
  absl::StatusOr<ast::ExprPtr> ParseFilterExpr(ast::ExprPtr node);
  absl::StatusOr<ast::ExprPtr> ParseSubscript(ast::ExprPtr node);
  absl::StatusOr<ast::ExprPtr> ParseSubscribed();
  absl::Status ParseCallArgs(ast::Args* args);
  absl::StatusOr<ast::ExprPtr> ParseCall(ast::ExprPtr node);
  absl::StatusOr<std::string> ParseDottedName();
  absl::StatusOr<ast::ExprPtr> ParseTest(ast::ExprPtr node);

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace folio::jinja

#endif  // FOLIO_COMMON_JINJA_EXPRESSION_PARSER_H_
