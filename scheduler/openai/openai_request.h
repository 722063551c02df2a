#ifndef FOLIO_SCHEDULER_OPENAI_OPENAI_REQUEST_H_
#define FOLIO_SCHEDULER_OPENAI_OPENAI_REQUEST_H_

// The bodies of POST /v1/completions and /v1/chat/completions, read into
// folio's own request types: sampling fields go to v1::SamplingParams
// unchanged in meaning (docs/api.md has the table), so every check the
// gRPC path makes (ParseGenerateRequest) applies to HTTP requests too.
// This layer checks only JSON types, the OpenAI-only fields and what folio
// does not support yet (400 naming the field, never silently dropped).
// Fields it does not know are ignored, as OpenAI and vLLM do.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/chat_template.h"
#include "common/sampling_params.h"  // kMaxLogprobs
#include "folio/v1/generation.pb.h"
#include "nlohmann/json.hpp"
#include "scheduler/openai/openai_error.h"

namespace folio {

// One prompt of /v1/completions: text, or token ids.
struct CompletionPrompt {
  bool is_text = true;
  std::string text;
  std::vector<int32_t> ids;
};

// What a generation request asks for, before tokenization.
struct OpenAiGeneration {
  bool chat = false;
  std::string model;  // empty: not given (the served model)
  bool stream = false;
  bool include_usage = false;           // stream_options.include_usage
  bool continuous_usage_stats = false;  // stream_options.continuous_usage_stats (vLLM)
  std::optional<std::string> request_id;
  // Every prompt's parameters. max_tokens stays unset when the client left
  // it unset (chat then fills in the room left by the prompt).
  v1::SamplingParams sampling;
  // Log-probs of the sampled tokens with this many alternatives: the
  // completions `logprobs`, or chat `top_logprobs` when `logprobs` is true.
  std::optional<int32_t> logprobs;

  // /v1/completions
  std::vector<CompletionPrompt> prompts;
  bool echo = false;

  // /v1/chat/completions
  ChatTemplate::Input chat_input;
  bool add_special_tokens = false;  // vLLM's: the template already adds BOS
};

// Parses a request body (already JSON). nullopt on success.
std::optional<OpenAiError> ParseCompletionBody(const nlohmann::ordered_json& body,
                                               OpenAiGeneration* out);
std::optional<OpenAiError> ParseChatBody(const nlohmann::ordered_json& body,
                                         OpenAiGeneration* out);

}  // namespace folio

#endif  // FOLIO_SCHEDULER_OPENAI_OPENAI_REQUEST_H_
