#include "scheduler/openai/openai_request.h"

#include <cmath>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace folio {
namespace {

using Json = nlohmann::ordered_json;

const char* TypeName(const Json& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

// Typed access to the top-level fields of a body; null counts as absent
// (clients send null for "not set"). The first type error is kept.
class Fields {
 public:
  explicit Fields(const Json& body) : body_(body) {}

  const Json* Get(const char* name) const {
    auto it = body_.find(name);
    if (it == body_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool Has(const char* name) const { return Get(name) != nullptr; }

  std::optional<bool> Bool(const char* name) {
    const Json* v = Get(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) return Fail(name, "must be a boolean", *v), std::nullopt;
    return v->get<bool>();
  }
  std::optional<double> Number(const char* name) {
    const Json* v = Get(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) return Fail(name, "must be a number", *v), std::nullopt;
    return v->get<double>();
  }
  std::optional<int64_t> Int(const char* name) {
    const Json* v = Get(name);
    if (v == nullptr) return std::nullopt;
    if (v->is_number_integer()) return v->get<int64_t>();
    if (v->is_number_float()) {  // 2.0 is an integer, 2.5 is not (as pydantic)
      const double d = v->get<double>();
      if (std::floor(d) == d && std::fabs(d) < 9e15) return static_cast<int64_t>(d);
    }
    return Fail(name, "must be an integer", *v), std::nullopt;
  }
  // An integer in [lo, hi].
  std::optional<int64_t> IntIn(const char* name, int64_t lo, int64_t hi) {
    std::optional<int64_t> v = Int(name);
    if (v.has_value() && (*v < lo || *v > hi)) {
      error_ = InvalidField(name, absl::StrCat("must be in [", lo, ", ", hi, "], got ", *v));
      return std::nullopt;
    }
    return v;
  }
  std::optional<std::string> String(const char* name) {
    const Json* v = Get(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) return Fail(name, "must be a string", *v), std::nullopt;
    return v->get<std::string>();
  }
  // A string or a list of strings (`stop`).
  std::vector<std::string> StringOrList(const char* name) {
    std::vector<std::string> out;
    const Json* v = Get(name);
    if (v == nullptr) return out;
    if (v->is_string()) return {v->get<std::string>()};
    if (!v->is_array()) return Fail(name, "must be a string or a list of strings", *v), out;
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) {
        Fail(absl::StrCat(name, "[", i, "]"), "must be a string", (*v)[i]);
        return {};
      }
      out.push_back((*v)[i].get<std::string>());
    }
    return out;
  }
  std::vector<int32_t> IntList(const char* name) {
    std::vector<int32_t> out;
    const Json* v = Get(name);
    if (v == nullptr) return out;
    if (!v->is_array()) return Fail(name, "must be a list of integers", *v), out;
    for (size_t i = 0; i < v->size(); ++i) {
      const Json& e = (*v)[i];
      if (!e.is_number_integer() || e.get<int64_t>() < std::numeric_limits<int32_t>::min() ||
          e.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        Fail(absl::StrCat(name, "[", i, "]"), "must be a 32-bit integer", e);
        return {};
      }
      out.push_back(static_cast<int32_t>(e.get<int64_t>()));
    }
    return out;
  }

  void Fail(std::string_view name, std::string_view what, const Json& got) {
    if (!error_.has_value()) {
      error_ = InvalidField(name, absl::StrCat(std::string(what), ", got ", TypeName(got)));
    }
  }
  void Refuse(const char* name, std::string_view why) {
    if (!error_.has_value()) error_ = InvalidField(name, why);
  }
  std::optional<OpenAiError>& error() { return error_; }

 private:
  const Json& body_;
  std::optional<OpenAiError> error_;
};

// The fields both endpoints share.
void ParseCommon(Fields& f, bool chat, OpenAiGeneration* out) {
  v1::SamplingParams& sp = out->sampling;
  if (auto v = f.String("model")) out->model = *v;
  out->stream = f.Bool("stream").value_or(false);
  if (const Json* so = f.Get("stream_options")) {
    if (!so->is_object()) {
      f.Fail("stream_options", "must be an object", *so);
    } else if (!out->stream) {
      f.Refuse("stream_options", "is only allowed with stream: true");
    } else {
      Fields opts(*so);
      out->include_usage = opts.Bool("include_usage").value_or(false);
      out->continuous_usage_stats = opts.Bool("continuous_usage_stats").value_or(false);
      if (opts.error().has_value() && !f.error().has_value()) {
        f.error() = opts.error();
        f.error()->param = "stream_options." + f.error()->param;
        f.error()->message = "stream_options." + f.error()->message;
      }
    }
  }
  if (auto v = f.String("request_id")) out->request_id = *v;
  if (auto v = f.IntIn("n", 1, 128)) sp.set_n(static_cast<uint32_t>(*v));
  if (auto v = f.IntIn("best_of", 1, 128)) sp.set_best_of(static_cast<uint32_t>(*v));
  if (auto v = f.Number("temperature")) sp.set_temperature(static_cast<float>(*v));
  if (auto v = f.Number("top_p")) sp.set_top_p(static_cast<float>(*v));
  if (auto v = f.IntIn("top_k", -1, std::numeric_limits<int32_t>::max())) {
    sp.set_top_k(static_cast<int32_t>(*v));
  }
  if (auto v = f.Number("min_p")) sp.set_min_p(static_cast<float>(*v));
  if (auto v = f.Number("repetition_penalty")) sp.set_repetition_penalty(static_cast<float>(*v));
  if (auto v = f.Number("presence_penalty")) sp.set_presence_penalty(static_cast<float>(*v));
  if (auto v = f.Number("frequency_penalty")) sp.set_frequency_penalty(static_cast<float>(*v));
  if (auto v = f.Int("seed")) sp.set_seed(static_cast<uint64_t>(*v));
  for (const std::string& s : f.StringOrList("stop")) sp.add_stop(s);
  for (int32_t id : f.IntList("stop_token_ids")) sp.add_stop_token_ids(id);
  for (int32_t id : f.IntList("allowed_token_ids")) sp.add_allowed_token_ids(id);
  for (const std::string& s : f.StringOrList("bad_words")) sp.add_bad_words(s);
  if (const Json* bias = f.Get("logit_bias")) {
    if (!bias->is_object()) {
      f.Fail("logit_bias", "must be an object mapping token ids to biases", *bias);
    } else {
      for (const auto& [key, value] : bias->items()) {
        int32_t token = 0;
        if (!absl::SimpleAtoi(key, &token)) {
          f.Refuse("logit_bias", absl::StrCat("keys must be token ids, got \"", key, "\""));
          break;
        }
        if (!value.is_number()) {
          f.Fail(absl::StrCat("logit_bias[", key, "]"), "must be a number", value);
          break;
        }
        (*sp.mutable_logit_bias())[token] = value.get<float>();
      }
    }
  }
  if (auto v = f.IntIn("min_tokens", 0, std::numeric_limits<int32_t>::max())) {
    sp.set_min_tokens(static_cast<uint32_t>(*v));
  }
  if (auto v = f.Bool("ignore_eos")) sp.set_ignore_eos(*v);
  if (auto v = f.Bool("skip_special_tokens")) sp.set_skip_special_tokens(*v);
  if (auto v = f.Bool("include_stop_str_in_output")) sp.set_include_stop_str_in_output(*v);
  if (auto v = f.IntIn("priority", std::numeric_limits<int32_t>::min(),
                       std::numeric_limits<int32_t>::max())) {
    sp.set_priority(static_cast<int32_t>(*v));
  }
  if (auto v = f.IntIn("truncate_prompt_tokens", -1, std::numeric_limits<int32_t>::max())) {
    sp.set_truncate_prompt_tokens(static_cast<int32_t>(*v));
  }
  if (auto v = f.IntIn("prompt_logprobs", 0, kMaxLogprobs)) {
    sp.set_prompt_logprobs(static_cast<uint32_t>(*v));
  }
  if (auto v = f.String("cache_salt")) sp.set_cache_salt(*v);
  // max_completion_tokens (chat) wins over the older max_tokens.
  std::optional<int64_t> max_tokens = f.IntIn("max_tokens", 1, std::numeric_limits<int32_t>::max());
  if (chat) {
    if (auto v = f.IntIn("max_completion_tokens", 1, std::numeric_limits<int32_t>::max())) {
      max_tokens = v;
    }
  }
  if (max_tokens.has_value()) sp.set_max_tokens(static_cast<uint32_t>(*max_tokens));
  f.String("user");  // accepted, unused: type-checked only

  // Not supported yet: refused by name rather than ignored.
  if (f.Has("functions")) f.Refuse("functions", "is not supported");
  if (f.Has("function_call")) f.Refuse("function_call", "is not supported");
  if (const Json* rf = f.Get("response_format")) {
    if (!rf->is_object() || rf->value("type", "") != "text") {
      f.Refuse("response_format", "is not supported except {\"type\": \"text\"}");
    }
  }
  if (f.Has("audio")) f.Refuse("audio", "is not supported");
}

// An element of `prompt` that is a list of token ids.
bool TokenIdList(const Json& v, std::vector<int32_t>* ids) {
  if (!v.is_array() || v.empty()) return false;
  for (const Json& e : v) {
    if (!e.is_number_integer() || e.get<int64_t>() < std::numeric_limits<int32_t>::min() ||
        e.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return false;
    }
    ids->push_back(static_cast<int32_t>(e.get<int64_t>()));
  }
  return true;
}

std::optional<OpenAiError> ParsePrompts(const Json* prompt, OpenAiGeneration* out) {
  constexpr char kShape[] =
      "must be a string, a list of strings, a list of token ids or a list of token-id lists";
  if (prompt == nullptr) return InvalidField("prompt", "is required");
  if (prompt->is_string()) {
    out->prompts.push_back({true, prompt->get<std::string>(), {}});
    return std::nullopt;
  }
  if (!prompt->is_array() || prompt->empty()) return InvalidField("prompt", kShape);
  if ((*prompt)[0].is_number()) {
    CompletionPrompt p{false, {}, {}};
    if (!TokenIdList(*prompt, &p.ids)) return InvalidField("prompt", kShape);
    out->prompts.push_back(std::move(p));
    return std::nullopt;
  }
  for (size_t i = 0; i < prompt->size(); ++i) {
    const Json& e = (*prompt)[i];
    CompletionPrompt p;
    if (e.is_string()) {
      p.text = e.get<std::string>();
    } else {
      p.is_text = false;
      if (!TokenIdList(e, &p.ids)) {
        return InvalidField(absl::StrCat("prompt[", i, "]"),
                            "must be a string or a non-empty list of token ids");
      }
    }
    out->prompts.push_back(std::move(p));
  }
  return std::nullopt;
}

// messages[i].content as the template sees it: a string. A list of text
// parts becomes their texts joined by newlines (vLLM's "string" content
// format); any other part type is refused by name.
std::optional<OpenAiError> FlattenContent(Json& content, size_t i) {
  const std::string field = absl::StrCat("messages[", i, "].content");
  if (content.is_null() || content.is_string()) return std::nullopt;
  if (!content.is_array()) {
    return InvalidField(field, absl::StrCat("must be a string or a list of content parts, got ",
                                            TypeName(content)));
  }
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const Json& part = content[j];
    const std::string part_field = absl::StrCat(field, "[", j, "]");
    if (!part.is_object()) return InvalidField(part_field, "must be an object");
    const auto type = part.find("type");
    if (type == part.end() || !type->is_string()) {
      return InvalidField(part_field + ".type", "is required");
    }
    if (*type != "text") {
      return InvalidField(part_field + ".type",
                          absl::StrCat("'", type->get<std::string>(),
                                       "' is not supported (only text parts are)"));
    }
    const auto t = part.find("text");
    if (t == part.end() || !t->is_string()) {
      return InvalidField(part_field + ".text", "must be a string");
    }
    if (j > 0) text += "\n";
    text += t->get<std::string>();
  }
  content = std::move(text);
  return std::nullopt;
}

std::optional<OpenAiError> ParseMessages(const Json* messages, Json* out) {
  if (messages == nullptr) return InvalidField("messages", "is required");
  if (!messages->is_array() || messages->empty()) {
    return InvalidField("messages", "must be a non-empty list of messages");
  }
  *out = *messages;
  for (size_t i = 0; i < out->size(); ++i) {
    Json& m = (*out)[i];
    const std::string field = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) return InvalidField(field, "must be an object");
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return InvalidField(field + ".role", "is required");
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool") {
      return InvalidField(field + ".role",
                          absl::StrCat("'", r, "' is not one of system, developer, user, "
                                               "assistant, tool"));
    }
    auto content = m.find("content");
    if (content == m.end()) {
      if (r != "assistant") return InvalidField(field + ".content", "is required");
      continue;
    }
    if (auto e = FlattenContent(*content, i)) return e;
  }
  return std::nullopt;
}

}  // namespace

std::optional<OpenAiError> ParseCompletionBody(const Json& body, OpenAiGeneration* out) {
  if (!body.is_object()) return InvalidField("body", "must be a JSON object");
  Fields f(body);
  out->chat = false;
  ParseCommon(f, /*chat=*/false, out);
  out->echo = f.Bool("echo").value_or(false);
  if (auto v = f.IntIn("logprobs", 0, kMaxLogprobs)) out->logprobs = static_cast<int32_t>(*v);
  if (const Json* suffix = f.Get("suffix")) {
    (void)suffix;
    f.Refuse("suffix", "is not supported");
  }
  if (f.error().has_value()) return f.error();
  return ParsePrompts(f.Get("prompt"), out);
}

std::optional<OpenAiError> ParseChatBody(const Json& body, OpenAiGeneration* out) {
  if (!body.is_object()) return InvalidField("body", "must be a JSON object");
  Fields f(body);
  out->chat = true;
  ParseCommon(f, /*chat=*/true, out);
  const bool logprobs = f.Bool("logprobs").value_or(false);
  std::optional<int64_t> top = f.IntIn("top_logprobs", 0, kMaxLogprobs);
  if (top.has_value() && !logprobs) f.Refuse("top_logprobs", "needs logprobs: true");
  if (logprobs) out->logprobs = static_cast<int32_t>(top.value_or(0));
  ChatTemplate::Input& in = out->chat_input;
  in.add_generation_prompt = f.Bool("add_generation_prompt").value_or(true);
  in.continue_final_message = f.Bool("continue_final_message").value_or(false);
  if (in.add_generation_prompt && in.continue_final_message) {
    // Only when the client set both: add_generation_prompt defaults to true.
    if (f.Has("add_generation_prompt")) {
      f.Refuse("continue_final_message", "cannot be used with add_generation_prompt: true");
    } else {
      in.add_generation_prompt = false;
    }
  }
  out->add_special_tokens = f.Bool("add_special_tokens").value_or(false);
  if (const Json* kwargs = f.Get("chat_template_kwargs")) {
    if (!kwargs->is_object()) {
      f.Fail("chat_template_kwargs", "must be an object", *kwargs);
    } else {
      in.kwargs = *kwargs;
    }
  }
  // Tools are passed to the template only when the client says not to call
  // them (tool_choice "none"); calling tools is not supported yet.
  const Json* tools = f.Get("tools");
  const bool has_tools = tools != nullptr && !(tools->is_array() && tools->empty());
  std::string tool_choice = "auto";
  if (const Json* tc = f.Get("tool_choice")) {
    tool_choice = tc->is_string() ? tc->get<std::string>() : "a function";
  }
  if (tool_choice != "none" && tool_choice != "auto") {
    f.Refuse("tool_choice", "is not supported except \"none\"");
  } else if (has_tools && tool_choice != "none") {
    f.Refuse("tools", "are not supported yet (tool calls are not parsed); send tool_choice "
                      "\"none\" to show them to the model without calling them");
  } else if (has_tools) {
    if (!tools->is_array()) {
      f.Fail("tools", "must be a list", *tools);
    } else {
      in.tools = *tools;
    }
  }
  if (f.error().has_value()) return f.error();
  return ParseMessages(f.Get("messages"), &in.messages);
}

}  // namespace folio
