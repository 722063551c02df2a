// The OpenAI request bodies read into folio's request types, and the
// errors for what is wrong or not supported, each naming its field.

#include "scheduler/openai/openai_request.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "scheduler/openai/openai_error.h"

namespace folio {
namespace {

using Json = nlohmann::ordered_json;

OpenAiGeneration Completion(const char* body) {
  OpenAiGeneration g;
  std::optional<OpenAiError> e = ParseCompletionBody(Json::parse(body), &g);
  EXPECT_FALSE(e.has_value()) << (e ? e->message : "");
  return g;
}

OpenAiError CompletionError(const char* body) {
  OpenAiGeneration g;
  std::optional<OpenAiError> e = ParseCompletionBody(Json::parse(body), &g);
  EXPECT_TRUE(e.has_value()) << body;
  return e.value_or(OpenAiError{});
}

OpenAiError ChatError(const char* body) {
  OpenAiGeneration g;
  std::optional<OpenAiError> e = ParseChatBody(Json::parse(body), &g);
  EXPECT_TRUE(e.has_value()) << body;
  return e.value_or(OpenAiError{});
}

TEST(OpenAiRequestTest, SamplingFieldsMapOntoSamplingParams) {
  OpenAiGeneration g = Completion(R"({
    "model": "m", "prompt": "hi", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9,
    "top_k": 40, "min_p": 0.1, "repetition_penalty": 1.1, "presence_penalty": 0.5,
    "frequency_penalty": -0.5, "seed": 42, "stop": ["a", "b"], "n": 2, "best_of": 3,
    "logit_bias": {"5": -100, "7": 2.5}, "stop_token_ids": [9], "ignore_eos": true,
    "min_tokens": 2, "skip_special_tokens": false, "include_stop_str_in_output": true,
    "priority": 3, "truncate_prompt_tokens": 100, "prompt_logprobs": 1,
    "bad_words": ["x"], "allowed_token_ids": [1, 2], "cache_salt": "t", "request_id": "r1",
    "logprobs": 3, "echo": true, "user": "u", "unknown_field": {"ignored": 1}})");
  const v1::SamplingParams& sp = g.sampling;
  EXPECT_EQ(g.model, "m");
  EXPECT_EQ(sp.max_tokens(), 7u);
  EXPECT_FLOAT_EQ(sp.temperature(), 0.5f);
  EXPECT_FLOAT_EQ(sp.top_p(), 0.9f);
  EXPECT_EQ(sp.top_k(), 40);
  EXPECT_FLOAT_EQ(sp.min_p(), 0.1f);
  EXPECT_FLOAT_EQ(sp.repetition_penalty(), 1.1f);
  EXPECT_FLOAT_EQ(sp.presence_penalty(), 0.5f);
  EXPECT_FLOAT_EQ(sp.frequency_penalty(), -0.5f);
  EXPECT_EQ(sp.seed(), 42u);
  ASSERT_EQ(sp.stop_size(), 2);
  EXPECT_EQ(sp.stop(1), "b");
  EXPECT_EQ(sp.n(), 2u);
  EXPECT_EQ(sp.best_of(), 3u);
  EXPECT_FLOAT_EQ(sp.logit_bias().at(5), -100.0f);
  EXPECT_FLOAT_EQ(sp.logit_bias().at(7), 2.5f);
  EXPECT_EQ(sp.stop_token_ids(0), 9);
  EXPECT_TRUE(sp.ignore_eos());
  EXPECT_EQ(sp.min_tokens(), 2u);
  EXPECT_FALSE(sp.skip_special_tokens());
  EXPECT_TRUE(sp.include_stop_str_in_output());
  EXPECT_EQ(sp.priority(), 3);
  EXPECT_EQ(sp.truncate_prompt_tokens(), 100);
  EXPECT_EQ(sp.prompt_logprobs(), 1u);
  EXPECT_EQ(sp.bad_words(0), "x");
  EXPECT_EQ(sp.allowed_token_ids_size(), 2);
  EXPECT_EQ(sp.cache_salt(), "t");
  EXPECT_EQ(g.request_id.value_or(""), "r1");
  EXPECT_EQ(g.logprobs.value_or(-1), 3);
  EXPECT_TRUE(g.echo);
}

TEST(OpenAiRequestTest, UnsetFieldsStayUnsetAndNullIsUnset) {
  OpenAiGeneration g = Completion(R"({"prompt": "hi", "temperature": null, "stop": null})");
  EXPECT_FALSE(g.sampling.has_temperature());
  EXPECT_FALSE(g.sampling.has_max_tokens());
  EXPECT_EQ(g.sampling.stop_size(), 0);
  EXPECT_FALSE(g.logprobs.has_value());
  EXPECT_FALSE(g.stream);
}

TEST(OpenAiRequestTest, PromptShapes) {
  EXPECT_EQ(Completion(R"({"prompt": "a"})").prompts.size(), 1u);
  OpenAiGeneration list = Completion(R"({"prompt": ["a", "b"]})");
  ASSERT_EQ(list.prompts.size(), 2u);
  EXPECT_EQ(list.prompts[1].text, "b");
  OpenAiGeneration ids = Completion(R"({"prompt": [1, 2, 3]})");
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_FALSE(ids.prompts[0].is_text);
  EXPECT_EQ(ids.prompts[0].ids, (std::vector<int32_t>{1, 2, 3}));
  OpenAiGeneration lists = Completion(R"({"prompt": [[1], [2, 3]]})");
  ASSERT_EQ(lists.prompts.size(), 2u);
  EXPECT_EQ(lists.prompts[1].ids, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(CompletionError(R"({"prompt": [1, "a"]})").param, "prompt");
  EXPECT_EQ(CompletionError(R"({"prompt": ["a", [1, "x"]]})").param, "prompt[1]");
  EXPECT_EQ(CompletionError(R"({"prompt": []})").param, "prompt");
  EXPECT_EQ(CompletionError(R"({"prompt": 5})").param, "prompt");
  EXPECT_EQ(CompletionError(R"({})").param, "prompt");
}

TEST(OpenAiRequestTest, TypeErrorsNameTheField) {
  EXPECT_EQ(CompletionError(R"({"prompt": "a", "temperature": "hot"})").param, "temperature");
  EXPECT_EQ(CompletionError(R"({"prompt": "a", "max_tokens": 1.5})").param, "max_tokens");
  EXPECT_EQ(CompletionError(R"({"prompt": "a", "max_tokens": 0})").param, "max_tokens");
  EXPECT_EQ(CompletionError(R"({"prompt": "a", "n": 0})").param, "n");
  EXPECT_EQ(CompletionError(R"({"prompt": "a", "stream": "yes"})").param, "stream");
  EXPECT_EQ(CompletionError(R"({"prompt": "a", "stop": [1]})").param, "stop[0]");
  EXPECT_EQ(CompletionError(R"({"prompt": "a", "logit_bias": {"x": 1}})").param, "logit_bias");
  EXPECT_EQ(CompletionError(R"({"prompt": "a", "logit_bias": {"1": "x"}})").param,
            "logit_bias[1]");
  EXPECT_EQ(CompletionError(R"({"prompt": "a", "logprobs": 21})").param, "logprobs");
  EXPECT_EQ(CompletionError(R"({"prompt": "a", "stop_token_ids": [1.5]})").param,
            "stop_token_ids[0]");
  EXPECT_EQ(CompletionError(R"({"prompt": "a", "stream_options": {"include_usage": true}})").param,
            "stream_options");
  EXPECT_EQ(CompletionError(
                R"({"prompt": "a", "stream": true, "stream_options": {"include_usage": 1}})")
                .param,
            "stream_options.include_usage");
  EXPECT_EQ(CompletionError(R"([1, 2])").param, "body");
  // 2.0 is an integer, as OpenAI's and vLLM's validators take it.
  EXPECT_EQ(Completion(R"({"prompt": "a", "max_tokens": 2.0})").sampling.max_tokens(), 2u);
}

TEST(OpenAiRequestTest, UnsupportedFieldsAreRefusedByName) {
  EXPECT_EQ(CompletionError(R"({"prompt": "a", "suffix": "z"})").param, "suffix");
  const char* user = R"("messages": [{"role": "user", "content": "hi"}])";
  auto chat = [&](const std::string& extra) {
    return ChatError(("{" + std::string(user) + ", " + extra + "}").c_str()).param;
  };
  EXPECT_EQ(chat(R"("tools": [{"type": "function", "function": {"name": "f"}}])"), "tools");
  EXPECT_EQ(chat(R"("tool_choice": "required")"), "tool_choice");
  EXPECT_EQ(chat(R"("tool_choice": {"type": "function"})"), "tool_choice");
  EXPECT_EQ(chat(R"("functions": [])"), "functions");
  EXPECT_EQ(chat(R"("response_format": {"type": "json_object"})"), "response_format");
  EXPECT_EQ(chat(R"("top_logprobs": 2)"), "top_logprobs");
  EXPECT_EQ(chat(R"("add_generation_prompt": true, "continue_final_message": true)"),
            "continue_final_message");
}

TEST(OpenAiRequestTest, ChatMessagesAndOptions) {
  OpenAiGeneration g;
  ASSERT_FALSE(ParseChatBody(Json::parse(R"({
    "messages": [{"role": "system", "content": "s"},
                 {"role": "user", "content": [{"type": "text", "text": "a"},
                                              {"type": "text", "text": "b"}]},
                 {"role": "assistant", "content": null, "tool_calls": []}],
    "max_tokens": 5, "max_completion_tokens": 9, "logprobs": true, "top_logprobs": 4,
    "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "none",
    "continue_final_message": true, "chat_template_kwargs": {"enable_thinking": false}})"),
                             &g)
                   .has_value());
  EXPECT_TRUE(g.chat);
  EXPECT_EQ(g.sampling.max_tokens(), 9u);  // max_completion_tokens wins
  EXPECT_EQ(g.logprobs.value_or(-1), 4);
  const ChatTemplate::Input& in = g.chat_input;
  ASSERT_EQ(in.messages.size(), 3u);
  EXPECT_EQ(in.messages[1]["content"], "a\nb");  // text parts joined
  EXPECT_TRUE(in.messages[2]["content"].is_null());
  EXPECT_TRUE(in.continue_final_message);
  EXPECT_FALSE(in.add_generation_prompt);  // implied by continue_final_message
  EXPECT_EQ(in.kwargs["enable_thinking"], false);
  ASSERT_TRUE(in.tools.is_array());  // shown to the template with tool_choice none
  EXPECT_FALSE(g.add_special_tokens);

  EXPECT_EQ(ChatError(R"({"messages": []})").param, "messages");
  EXPECT_EQ(ChatError(R"({"messages": [{"content": "x"}]})").param, "messages[0].role");
  EXPECT_EQ(ChatError(R"({"messages": [{"role": "robot", "content": "x"}]})").param,
            "messages[0].role");
  EXPECT_EQ(ChatError(R"({"messages": [{"role": "user"}]})").param, "messages[0].content");
  EXPECT_EQ(ChatError(R"({"messages": [{"role": "user", "content": 5}]})").param,
            "messages[0].content");
  EXPECT_EQ(ChatError(R"({"messages": [{"role": "user", "content": [
              {"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "u"}}]}]})")
                .param,
            "messages[0].content[1].type");
  EXPECT_EQ(ChatError(R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})").param,
            "messages[0].content[0].text");
}

TEST(OpenAiErrorTest, EngineStatusesMapOntoOpenAiFields) {
  OpenAiError e = FromStatus(absl::InvalidArgumentError("sampling_params.top_p must be in (0, 1], got 1.5"));
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "top_p");
  EXPECT_EQ(e.message, "top_p must be in (0, 1], got 1.5");
  EXPECT_EQ(FromStatus(absl::InvalidArgumentError("sampling_params.logit_bias[9] names ..."))
                .param,
            "logit_bias");
  EXPECT_EQ(FromStatus(absl::InvalidArgumentError("token_ids.ids[1] is 5000, outside"), "prompt")
                .param,
            "prompt");
  EXPECT_EQ(FromStatus(absl::InvalidArgumentError("prompt has 600 tokens"), "messages").param,
            "messages");
  EXPECT_EQ(FromStatus(absl::UnavailableError("down")).status, 503);
  EXPECT_EQ(FromStatus(absl::ResourceExhaustedError("full")).status, 429);
  EXPECT_EQ(FromStatus(absl::InternalError("bug")).status, 500);
  const Json body = Json::parse(e.ToJson());
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(body["error"]["code"].is_null());
}

}  // namespace
}  // namespace folio
