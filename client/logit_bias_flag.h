#ifndef FOLIO_CLIENT_LOGIT_BIAS_FLAG_H_
#define FOLIO_CLIENT_LOGIT_BIAS_FLAG_H_

// The value of a --logit-bias flag: "TOKEN_ID=BIAS", e.g. "2047=-100".

#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "common/sampling_params.h"

namespace folio {

// The bias the value names; nullopt when it is not "integer=number" (the
// range is the server's to check).
inline std::optional<TokenBias> ParseLogitBiasFlag(absl::string_view value) {
  const size_t eq = value.find('=');
  if (eq == absl::string_view::npos) return std::nullopt;
  int32_t token = 0;
  float bias = 0.0f;
  if (!absl::SimpleAtoi(value.substr(0, eq), &token) ||
      !absl::SimpleAtof(value.substr(eq + 1), &bias)) {
    return std::nullopt;
  }
  return TokenBias{token, bias};
}

}  // namespace folio

#endif  // FOLIO_CLIENT_LOGIT_BIAS_FLAG_H_
