#ifndef FOLIO_COMMON_JINJA_ERRORS_H_
#define FOLIO_COMMON_JINJA_ERRORS_H_

// How the renderer reports errors. Builtins return statuses without a line;
// the interpreter stamps the line of the innermost node the error passed
// through ("chat template line N: …"), once. raise_exception() errors keep
// their message exactly and carry a payload so callers can tell them apart.

#include <string_view>

#include "absl/status/status.h"

namespace folio::jinja {

// INVALID_ARGUMENT without a line yet (jinja's TypeError, UndefinedError, …).
absl::Status TemplateError(std::string_view message);
// RESOURCE_EXHAUSTED without a line yet (a limit of TemplateOptions).
absl::Status LimitError(std::string_view message);
// raise_exception(message): INVALID_ARGUMENT, message as is, marked raised.
absl::Status RaisedError(std::string_view message);
bool IsRaised(const absl::Status& status);

// Prefixes "chat template line N: " unless the status already has a line or
// was raised by the template. OK passes through.
absl::Status AtLine(absl::Status status, int line);
// Drops the internal "has a line" marker before a status leaves the library.
absl::Status Finish(absl::Status status);

}  // namespace folio::jinja

// Status propagation inside the renderer. ASSIGN_OR_RETURN expands to
// several statements: brace it under an if or a for.
#define FOLIO_JINJA_CONCAT_INNER(a, b) a##b
#define FOLIO_JINJA_CONCAT(a, b) FOLIO_JINJA_CONCAT_INNER(a, b)
#define FOLIO_JINJA_RETURN_IF_ERROR(expr)        \
  do {                                           \
    ::absl::Status folio_jinja_status = (expr);  \
    if (!folio_jinja_status.ok()) return folio_jinja_status; \
  } while (0)
#define FOLIO_JINJA_ASSIGN_OR_RETURN(lhs, expr) \
  FOLIO_JINJA_ASSIGN_OR_RETURN_IMPL(FOLIO_JINJA_CONCAT(folio_jinja_or_, __LINE__), lhs, expr)
#define FOLIO_JINJA_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                      \
  if (!tmp.ok()) return std::move(tmp).status();          \
  lhs = *std::move(tmp)

#endif  // FOLIO_COMMON_JINJA_ERRORS_H_
