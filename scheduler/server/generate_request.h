#ifndef FOLIO_SCHEDULER_SERVER_GENERATE_REQUEST_H_
#define FOLIO_SCHEDULER_SERVER_GENERATE_REQUEST_H_

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/generation_defaults.h"
#include "common/model_config.h"
#include "common/tokenizer.h"
#include "folio/v1/generation.pb.h"
#include "scheduler/request.h"
#include "scheduler/server/sequence_text.h"

namespace folio {

// What the served model allows a request to ask for.
struct RequestLimits {
  int32_t vocab_size = 0;
  int32_t max_model_len = 0;  // prompt + output tokens
  std::vector<TokenId> eos_token_ids;
  // Whether the scheduler orders by priority; without it a request's
  // priority would be ignored, so a non-zero one is refused (as vLLM does).
  bool priority_scheduling = false;
  // What unset sampling fields default to before vLLM's own defaults: the
  // model's generation_config.json (folio-scheduler --generation-config).
  SamplingDefaults sampling_defaults;
};

// A Generate request turned into what the engine runs: the scheduler's
// RequestSpec (id unset) plus what only the front end handles.
struct ParsedRequest {
  RequestSpec spec;
  std::vector<std::string> stop_strings;
  TextOptions text;
  std::optional<int32_t> logprobs;   // unset: no log-probs in the stream
  std::optional<std::string> request_id;  // the client's, when given
};

// OK when every id is in [0, vocab_size); else INVALID_ARGUMENT naming the
// first other one, "FIELD[i] is ID, outside the vocabulary [0, vocab_size)".
absl::Status CheckTokenIds(std::span<const TokenId> ids, int32_t vocab_size,
                           std::string_view field);

// Validates and converts, filling unset fields from limits.sampling_defaults,
// then vLLM's defaults.
// INVALID_ARGUMENT naming the field, e.g.
//   "sampling_params.top_p must be in (0, 1], got 1.5"
//   "prompt has 4100 tokens; max_model_len is 4096 (prompt + at least 1 new token)".
// Tokenizes text prompts (thread-safe: the tokenizer is immutable).
absl::StatusOr<ParsedRequest> ParseGenerateRequest(const v1::GenerateRequest& request,
                                                   const Tokenizer& tokenizer,
                                                   const RequestLimits& limits);

}  // namespace folio

#endif  // FOLIO_SCHEDULER_SERVER_GENERATE_REQUEST_H_
