#ifndef FOLIO_SCHEDULER_OPENAI_OPENAI_ERROR_H_
#define FOLIO_SCHEDULER_OPENAI_OPENAI_ERROR_H_

// Errors of the OpenAI-compatible HTTP API, in OpenAI's shape:
//   {"error": {"message": …, "type": …, "param": …, "code": …}}
// `param` names the OpenAI request field at fault (null when none).

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace folio {

struct OpenAiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null
  std::string code;   // empty: null

  // The response body.
  std::string ToJson() const;
};

// 400 invalid_request_error naming `param`: "param message" (a message that
// already starts with the field name is kept as is).
OpenAiError InvalidField(std::string_view param, std::string_view message);

// An engine status as an HTTP error: INVALID_ARGUMENT 400 (its first word,
// a gRPC field path such as "sampling_params.top_p", becomes the OpenAI
// param "top_p"; `prompt_param` replaces the prompt's fields "text" and
// "token_ids.ids"), ALREADY_EXISTS 400, UNAUTHENTICATED 401, NOT_FOUND 404,
// RESOURCE_EXHAUSTED 429, UNAVAILABLE 503, anything else 500.
OpenAiError FromStatus(const absl::Status& status, std::string_view prompt_param = "prompt");

}  // namespace folio

#endif  // FOLIO_SCHEDULER_OPENAI_OPENAI_ERROR_H_
