#include "scheduler/openai/openai_error.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/json_text.h"
#include "nlohmann/json.hpp"

namespace folio {
namespace {

nlohmann::ordered_json NullIfEmpty(const std::string& s) {
  return s.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s);
}

// "sampling_params.logit_bias[5]" -> "logit_bias"; "token_ids.ids" -> the prompt.
std::string ParamOf(std::string_view field, std::string_view prompt_param) {
  constexpr std::string_view kPrefix = "sampling_params.";
  if (field.substr(0, kPrefix.size()) == kPrefix) field.remove_prefix(kPrefix.size());
  const size_t end = field.find_first_of(".[");
  std::string_view base = field.substr(0, end);
  if (base == "text" || base == "token_ids" || base == "prompt") return std::string(prompt_param);
  return std::string(base);
}

}  // namespace

std::string OpenAiError::ToJson() const {
  const nlohmann::ordered_json body = {{"error",
                                         {{"message", message},
                                          {"type", type},
                                          {"param", NullIfEmpty(param)},
                                          {"code", NullIfEmpty(code)}}}};
  return JsonText(body);
}

OpenAiError InvalidField(std::string_view param, std::string_view message) {
  OpenAiError e;
  e.param = std::string(param);
  e.message = message.substr(0, param.size()) == param
                  ? std::string(message)
                  : absl::StrCat(std::string(param), " ", std::string(message));
  return e;
}

OpenAiError FromStatus(const absl::Status& status, std::string_view prompt_param) {
  OpenAiError e;
  // Field paths of the gRPC API read as the OpenAI fields they came from.
  e.message = absl::StrReplaceAll(status.message(), {{"sampling_params.", ""}});
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument: {
      const std::string message(status.message());
      e.param = ParamOf(message.substr(0, message.find(' ')), prompt_param);
      break;
    }
    case absl::StatusCode::kAlreadyExists:
      e.param = "request_id";
      break;
    case absl::StatusCode::kUnauthenticated:
      e.status = 401;
      e.code = "invalid_api_key";
      break;
    case absl::StatusCode::kNotFound:
      e.status = 404;
      break;
    case absl::StatusCode::kResourceExhausted:
      e.status = 429;
      e.type = "rate_limit_error";
      break;
    case absl::StatusCode::kUnavailable:
      e.status = 503;
      e.type = "service_unavailable_error";
      break;
    default:
      e.status = 500;
      e.type = "server_error";
      break;
  }
  return e;
}

}  // namespace folio
