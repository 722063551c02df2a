// Fuzzes the chat-template (Jinja) parser and renderer (common/jinja/
// template.h): the input is a template's source, parsed with the options
// transformers uses (trim_blocks, lstrip_blocks) and rendered with a fixed
// conversation and the variables ChatTemplate::Render passes (messages,
// tools, documents, add_generation_prompt, bos_token, eos_token), under
// tighter step and output limits than the defaults so that each input runs
// fast. Checks: no crash, UB, hang, stack overflow or exception; parse errors
// are INVALID_ARGUMENT; render errors are INVALID_ARGUMENT (template errors,
// raise_exception) or RESOURCE_EXHAUSTED (the limits); the output stays
// within max_output_bytes; a valid UTF-8 template renders valid UTF-8.

#include <cstdint>
#include <string>

#include "common/jinja/template.h"
#include "nlohmann/json.hpp"
#include "tests/fuzz/fuzz_util.h"

namespace {

using Json = nlohmann::ordered_json;

const Json& Context() {
  static const Json* context = new Json(Json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are a helpful assistant."},
      {"role": "user", "content": "What is 2+2? Caf\u00e9 \u65e5\u672c \ud83d\ude00"},
      {"role": "assistant", "content": "4", "tool_calls": [
        {"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
      {"role": "tool", "content": "{\"result\": 4}", "tool_call_id": "call_1"},
      {"role": "user", "content": [{"type": "text", "text": "Thanks!"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "add", "description": "Adds.",
      "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}],
    "documents": null,
    "add_generation_prompt": true,
    "bos_token": "<s>",
    "eos_token": "</s>"
  })"));
  return *context;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source = folio::fuzz::AsText(data, size);
  folio::jinja::TemplateOptions options;
  options.max_steps = 200'000;
  options.max_output_bytes = 1 << 20;
  absl::StatusOr<std::unique_ptr<folio::jinja::Template>> t =
      folio::jinja::Template::Parse(source, options);
  if (!t.ok()) {
    FUZZ_CHECK(t.status().code() == absl::StatusCode::kInvalidArgument, "parse: unexpected code: %s",
               t.status().ToString().c_str());
    return 0;
  }
  absl::StatusOr<std::string> out = (*t)->Render(Context());
  if (!out.ok()) {
    const absl::StatusCode code = out.status().code();
    FUZZ_CHECK(code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kResourceExhausted,
               "render: unexpected code: %s", out.status().ToString().c_str());
    return 0;
  }
  FUZZ_CHECK(static_cast<int64_t>(out->size()) <= options.max_output_bytes, "output of %zu bytes",
             out->size());
  if (folio::fuzz::IsValidUtf8(source)) {
    FUZZ_CHECK(folio::fuzz::IsValidUtf8(*out), "valid UTF-8 template rendered invalid UTF-8");
  }
  return 0;
}
