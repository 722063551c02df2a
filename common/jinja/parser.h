#ifndef FOLIO_COMMON_JINJA_PARSER_H_
#define FOLIO_COMMON_JINJA_PARSER_H_

// Builds the syntax tree from tokens with jinja2.parser's grammar and
// precedence (left-associative `**`, `-x|f` filtering the negation, tests
// taking one bare argument, `a if b` without else, chained comparisons).
// Checks what jinja checks at compile time: break/continue outside a loop,
// unknown filters and tests outside if-statements and conditional
// expressions. Nesting deeper than max_depth is refused, so no input can
// exhaust the stack.

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/jinja/ast.h"
#include "common/jinja/lexer.h"

namespace folio::jinja {

struct ParserOptions {
  LexerOptions lexer;
  int max_depth = 200;
};

// INVALID_ARGUMENT "chat template line N: <what>" on a syntax error.
absl::StatusOr<ast::Body> ParseTemplate(std::string_view source, const ParserOptions& options);

}  // namespace folio::jinja

#endif  // FOLIO_COMMON_JINJA_PARSER_H_
