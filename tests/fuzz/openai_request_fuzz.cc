// Fuzzes the OpenAI HTTP front end's request parsing
// (scheduler/openai/openai_request.h) the way OpenAiService::Generate runs it:
// the input is a POST body; it is read as JSON as openai_service.cc's
// ParseJson does (bodies nesting deeper than 64 refused first, then a
// non-throwing parse), then given to both ParseCompletionBody
// (/v1/completions) and ParseChatBody (/v1/chat/completions). Accepted chat
// bodies are rendered with the demo model's chat template, tokenized and
// turned into a GenerateRequest as Generate does (max_tokens filled in);
// accepted completion bodies give one GenerateRequest per prompt; each goes
// through ParseGenerateRequest (generate_request.h) with the demo model's
// limits. (HTTP/1.1 framing itself is Boost.Beast's, not ours: not fuzzed.)
// Checks: no crash, UB, hang or exception; every error is a 4xx whose JSON
// body parses back; the template fails only as the service maps to 400/429
// (INVALID_ARGUMENT, RESOURCE_EXHAUSTED), never as a server error; accepted
// requests keep CheckParsedRequest's promises (demo_model.h).

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/jinja/template.h"
#include "folio/v1/generation.pb.h"
#include "nlohmann/json.hpp"
#include "scheduler/openai/openai_request.h"
#include "scheduler/server/generate_request.h"
#include "tests/fuzz/demo_model.h"

namespace {

using Json = nlohmann::ordered_json;
using folio::fuzz::Demo;

// openai_service.cc's MaxJsonNesting (file-local there), copied.
int MaxJsonNesting(std::string_view text) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

void CheckError(const folio::OpenAiError& e) {
  FUZZ_CHECK(e.status >= 400 && e.status < 500, "status %d for a client error: %s", e.status,
             e.message.c_str());
  FUZZ_CHECK(!e.message.empty(), "error without a message");
  const Json back = Json::parse(e.ToJson(), nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(!back.is_discarded() && back.contains("error"), "error body is not JSON: %s",
             e.ToJson().c_str());
}

void Submit(const folio::v1::GenerateRequest& r) {
  const folio::fuzz::DemoModel& demo = Demo();
  absl::StatusOr<folio::ParsedRequest> parsed = folio::ParseGenerateRequest(r, *demo.tokenizer, demo.limits);
  if (!parsed.ok()) {
    FUZZ_CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument, "unexpected code: %s",
               parsed.status().ToString().c_str());
    CheckError(folio::FromStatus(parsed.status()));
    return;
  }
  folio::fuzz::CheckParsedRequest(*parsed, demo.limits);
}

void Chat(const Json& body) {
  folio::OpenAiGeneration g;
  if (auto e = folio::ParseChatBody(body, &g)) return CheckError(*e);
  FUZZ_CHECK(g.chat, "chat not set");
  FUZZ_CHECK(!(g.chat_input.add_generation_prompt && g.chat_input.continue_final_message),
             "both add_generation_prompt and continue_final_message");
  const folio::fuzz::DemoModel& demo = Demo();
  absl::StatusOr<std::string> prompt = demo.chat_template->Render(g.chat_input);
  if (!prompt.ok()) {
    const absl::StatusCode code = prompt.status().code();
    FUZZ_CHECK(code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kResourceExhausted,
               "the template failed as a server error: %s", prompt.status().ToString().c_str());
    return;
  }
  std::vector<int32_t> ids = demo.tokenizer->EncodePrompt(*prompt, g.add_special_tokens);
  if (ids.empty()) return;  // "render to an empty prompt"
  folio::v1::GenerateRequest r;
  if (g.logprobs.has_value()) g.sampling.set_logprobs(static_cast<uint32_t>(*g.logprobs));
  *r.mutable_sampling_params() = g.sampling;
  folio::v1::SamplingParams& sp = *r.mutable_sampling_params();
  const int32_t max_model_len = demo.limits.max_model_len;
  if (!sp.has_max_tokens()) {
    int64_t kept = static_cast<int64_t>(ids.size());
    if (sp.has_truncate_prompt_tokens()) {
      const int32_t k = sp.truncate_prompt_tokens();
      kept = std::min<int64_t>(kept, k == -1 ? max_model_len - 1 : k);
    }
    sp.set_max_tokens(static_cast<uint32_t>(std::max<int64_t>(1, max_model_len - kept)));
  }
  r.mutable_token_ids()->mutable_ids()->Assign(ids.begin(), ids.end());
  Submit(r);
}

void Completion(const Json& body) {
  folio::OpenAiGeneration g;
  if (auto e = folio::ParseCompletionBody(body, &g)) return CheckError(*e);
  FUZZ_CHECK(!g.chat && !g.prompts.empty(), "accepted without prompts");
  if (g.logprobs.has_value()) g.sampling.set_logprobs(static_cast<uint32_t>(*g.logprobs));
  const folio::fuzz::DemoModel& demo = Demo();
  for (const folio::CompletionPrompt& p : g.prompts) {
    FUZZ_CHECK(p.is_text || !p.ids.empty(), "empty token-id prompt accepted");
    folio::v1::GenerateRequest r;
    *r.mutable_sampling_params() = g.sampling;
    if (p.is_text && !(g.echo && g.logprobs.has_value())) {
      r.set_text(p.text);
    } else {
      std::vector<int32_t> ids = p.is_text ? demo.tokenizer->EncodePrompt(p.text, true) : p.ids;
      r.mutable_token_ids()->mutable_ids()->Assign(ids.begin(), ids.end());
    }
    Submit(r);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = folio::fuzz::AsText(data, size);
  if (MaxJsonNesting(text) > 64) return 0;
  const Json body = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return 0;
  Demo();
  Completion(body);
  Chat(body);
  return 0;
}
