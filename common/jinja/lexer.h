#ifndef FOLIO_COMMON_JINJA_LEXER_H_
#define FOLIO_COMMON_JINJA_LEXER_H_

// Splits a template into tokens exactly as jinja2 3.1's lexer does:
// newlines normalized to "\n" and one trailing newline dropped; `{%-`, `-%}`
// (and the `{{`/`{#` forms) strip whitespace; `{%+` / `+%}` keep it;
// trim_blocks drops the first newline after a block or comment tag;
// lstrip_blocks strips spaces and tabs from the start of a line up to a
// block or comment tag (not a `{{`); `{% raw %}` passes text through.
// Inside tags `}}` / `%}` end the tag only outside brackets, like jinja's
// balancing stack.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace folio::jinja {

struct Token {
  enum class Type {
    kData, kVariableBegin, kVariableEnd, kBlockBegin, kBlockEnd,
    kName, kString, kInteger, kFloat, kOperator, kEof
  };
  Type type;
  std::string value;  // data, name, string contents (unescaped), operator
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// INVALID_ARGUMENT "chat template line N: …" on a lexical error.
absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source, const LexerOptions& options);

}  // namespace folio::jinja

#endif  // FOLIO_COMMON_JINJA_LEXER_H_
