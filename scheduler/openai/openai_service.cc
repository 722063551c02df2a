#include "scheduler/openai/openai_service.h"

#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/jinja/template.h"
#include "common/json_text.h"
#include "nlohmann/json.hpp"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "scheduler/openai/completion_run.h"
#include "scheduler/openai/openai_request.h"
#include "scheduler/server/api_key_auth.h"

namespace folio {
namespace {

using Json = nlohmann::ordered_json;

OpenAiError NotReady() {
  return FromStatus(absl::UnavailableError("the model is still loading"));
}

OpenAiError ModelNotFound(const std::string& asked, const std::string& served) {
  OpenAiError e;
  e.status = 404;
  e.param = "model";
  e.code = "model_not_found";
  e.message = absl::StrCat("The model '", asked, "' does not exist; this server serves '", served,
                           "'");
  return e;
}

// How deep brackets nest in a JSON text (outside strings). Parsing is
// iterative, but copying and converting a value recurse: a request that
// nests deeper than any real one is refused before it is parsed.
int MaxJsonNesting(const std::string& text) {
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

constexpr int kMaxJsonNesting = 64;

// The body as JSON: 400 when it is not (invalid UTF-8 in a string included).
std::optional<OpenAiError> ParseJson(const std::string& body, Json* out) {
  if (MaxJsonNesting(body) > kMaxJsonNesting) {
    OpenAiError e;
    e.message = absl::StrCat("the request body nests deeper than ", kMaxJsonNesting, " levels");
    return e;
  }
  *out = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) {
    OpenAiError e;
    e.message = "the request body is not valid JSON (UTF-8)";
    return e;
  }
  return std::nullopt;
}

// The body of /tokenize or /detokenize: a JSON object whose `model`, when
// given, is the served one.
std::optional<OpenAiError> ParseUtilityBody(const std::string& body, const std::string& served,
                                            Json* out) {
  if (auto e = ParseJson(body, out)) return e;
  if (!out->is_object()) return InvalidField("body", "must be a JSON object");
  if (auto m = out->find("model"); m != out->end() && m->is_string() && *m != served) {
    return ModelNotFound(*m, served);
  }
  return std::nullopt;
}

uint64_t RandomBase() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace

OpenAiService::OpenAiService(Options options, std::unique_ptr<ChatTemplate> chat_template,
                             std::string no_template_reason)
    : options_(std::move(options)),
      chat_template_(std::move(chat_template)),
      no_template_reason_(std::move(no_template_reason)),
      created_(absl::ToUnixSeconds(absl::Now())),
      next_id_(RandomBase()) {
  if (options_.registry != nullptr) {
    requests_family_ = &prometheus::BuildCounter()
                            .Name("folio_http_requests_total")
                            .Help("HTTP requests answered, by endpoint and status code")
                            .Labels({{"model", options_.model_name}})
                            .Register(*options_.registry);
  }
}

OpenAiService::~OpenAiService() = default;

std::string OpenAiService::TransportErrorBody(int status, std::string_view message) {
  OpenAiError e;
  e.status = status;
  e.message = std::string(message);
  Count("other", status);
  return e.ToJson();
}

void OpenAiService::Count(const std::string& endpoint, int status) {
  if (requests_family_ == nullptr) return;
  const std::string key = absl::StrCat(endpoint, " ", status);
  prometheus::Counter* counter;
  {
    std::lock_guard<std::mutex> lock(counters_mu_);
    auto it = counters_.find(key);
    if (it == counters_.end()) {
      it = counters_
               .emplace(key, &requests_family_->Add(
                                 {{"endpoint", endpoint}, {"code", absl::StrCat(status)}}))
               .first;
    }
    counter = it->second;
  }
  counter->Increment();
}

void OpenAiService::Reply(const std::string& endpoint, HttpExchange& exchange, int status,
                          std::string body, std::string content_type) {
  Count(endpoint, status);
  exchange.Respond(status, std::move(content_type), std::move(body));
}

void OpenAiService::ReplyError(const std::string& endpoint, HttpExchange& exchange,
                               const OpenAiError& error) {
  Reply(endpoint, exchange, error.status, error.ToJson());
}

bool OpenAiService::Authorized(const HttpRequest& request) const {
  if (options_.api_key.empty()) return true;
  const std::string value(request.Header("authorization"));
  constexpr std::string_view kBearer = "Bearer ";
  if (value.compare(0, kBearer.size(), kBearer) != 0) return false;
  return ConstantTimeEquals(std::string(absl::StripAsciiWhitespace(value.substr(kBearer.size()))),
                            options_.api_key);
}

void OpenAiService::Handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
  const std::string& path = request.path;
  Engine* engine = engine_.load();
  // Open to probes and scrapers, with or without a key.
  if (path == "/health") {
    if (request.method != "GET") return ReplyError(path, *exchange, InvalidField("method", "must be GET"));
    if (engine == nullptr || !engine->healthy()) {
      return ReplyError(path, *exchange,
                        FromStatus(absl::UnavailableError(engine == nullptr
                                                              ? "the model is still loading"
                                                              : "the workers failed")));
    }
    return Reply(path, *exchange, 200, "");
  }
  if (path == "/metrics" && options_.registry != nullptr) {
    const std::string text = prometheus::TextSerializer().Serialize(options_.registry->Collect());
    return Reply(path, *exchange, 200, text, "text/plain; version=0.0.4; charset=utf-8");
  }

  static const char* const kRoutes[][2] = {
      {"/v1/completions", "POST"}, {"/v1/chat/completions", "POST"}, {"/v1/models", "GET"},
      {"/version", "GET"},         {"/tokenize", "POST"},            {"/detokenize", "POST"}};
  const char* method = nullptr;
  for (const auto& route : kRoutes) {
    if (path == route[0]) method = route[1];
  }
  if (method == nullptr) {
    OpenAiError e;
    e.status = 404;
    e.code = "not_found";
    e.message = absl::StrCat("no route ", request.method, " ", path);
    return ReplyError("other", *exchange, e);
  }
  if (request.method != method) {
    OpenAiError e;
    e.status = 405;
    e.message = absl::StrCat(path, " takes ", method, ", not ", request.method);
    return ReplyError(path, *exchange, e);
  }
  if (!Authorized(request)) {
    OpenAiError e;
    e.status = 401;
    e.code = "invalid_api_key";
    e.message = request.Header("authorization").empty()
                    ? "missing Authorization header (Authorization: Bearer <api key>)"
                    : "invalid API key";
    return ReplyError(path, *exchange, e);
  }
  if (path == "/version") {
    return Reply(path, *exchange, 200, JsonText(Json{{"version", options_.version}}));
  }
  if (engine == nullptr) return ReplyError(path, *exchange, NotReady());
  if (path == "/v1/models") return Models(*engine, *exchange);
  if (path == "/tokenize") return Tokenize(*engine, request, *exchange);
  if (path == "/detokenize") return Detokenize(*engine, request, *exchange);
  Generate(*engine, request, path == "/v1/chat/completions", std::move(exchange));
}

void OpenAiService::Models(Engine& engine, HttpExchange& exchange) {
  const v1::ModelInfo info = engine.ModelInfo();
  Json model = {{"id", options_.model_name},
                {"object", "model"},
                {"created", created_},
                {"owned_by", "folio"},
                {"root", options_.model_root},
                {"parent", nullptr},
                {"max_model_len", info.max_model_len()},
                {"permission", Json::array()}};
  Reply("/v1/models", exchange, 200,
        JsonText(Json{{"object", "list"}, {"data", Json::array({std::move(model)})}}));
}

std::optional<OpenAiError> OpenAiService::RenderChat(Engine& engine, const OpenAiGeneration& g,
                                                     std::vector<int32_t>* ids) const {
  if (chat_template_ == nullptr) {
    OpenAiError e;
    e.message = no_template_reason_;
    return e;
  }
  absl::StatusOr<std::string> prompt = chat_template_->Render(g.chat_input);
  if (!prompt.ok()) {
    OpenAiError e;
    e.message = jinja::IsRaisedException(prompt.status())
                    ? std::string(prompt.status().message())
                    : absl::StrCat("the chat template failed: ", prompt.status().message());
    if (prompt.status().code() != absl::StatusCode::kInvalidArgument &&
        prompt.status().code() != absl::StatusCode::kResourceExhausted) {
      e.status = 500;
      e.type = "server_error";
    }
    e.param = "messages";
    return e;
  }
  *ids = engine.Tokenize(*prompt, g.add_special_tokens);
  if (ids->empty()) return InvalidField("messages", "render to an empty prompt");
  return std::nullopt;
}

void OpenAiService::Generate(Engine& engine, const HttpRequest& request, bool chat,
                             std::shared_ptr<HttpExchange> exchange) {
  const std::string endpoint = request.path;
  Json body;
  if (auto e = ParseJson(request.body, &body)) return ReplyError(endpoint, *exchange, *e);
  OpenAiGeneration g;
  if (auto e = chat ? ParseChatBody(body, &g) : ParseCompletionBody(body, &g)) {
    return ReplyError(endpoint, *exchange, *e);
  }
  if (!g.model.empty() && g.model != options_.model_name) {
    return ReplyError(endpoint, *exchange, ModelNotFound(g.model, options_.model_name));
  }
  const int32_t n = static_cast<int32_t>(std::max<uint32_t>(1, g.sampling.n()));
  if (g.logprobs.has_value()) g.sampling.set_logprobs(static_cast<uint32_t>(*g.logprobs));

  CompletionRun::Options ro;
  ro.chat = chat;
  ro.stream = g.stream;
  ro.include_usage = g.include_usage;
  ro.model = options_.model_name;
  ro.created = absl::ToUnixSeconds(absl::Now());
  ro.n = n;
  ro.logprobs = g.logprobs;
  ro.echo = g.echo;

  std::vector<v1::GenerateRequest> requests;
  if (chat) {
    std::vector<int32_t> ids;
    if (auto e = RenderChat(engine, g, &ids)) return ReplyError(endpoint, *exchange, *e);
    v1::GenerateRequest r;
    *r.mutable_sampling_params() = g.sampling;
    v1::SamplingParams& sp = *r.mutable_sampling_params();
    // Without a max, a chat reply may use the room the prompt leaves (as
    // vLLM does), unless the model's generation_config sets one.
    const RequestLimits& limits = engine.limits();
    if (!sp.has_max_tokens() && !limits.sampling_defaults.max_tokens.has_value()) {
      int64_t kept = static_cast<int64_t>(ids.size());
      if (sp.has_truncate_prompt_tokens()) {
        const int32_t k = sp.truncate_prompt_tokens();
        kept = std::min<int64_t>(kept, k == -1 ? limits.max_model_len - 1 : k);
      }
      sp.set_max_tokens(static_cast<uint32_t>(std::max<int64_t>(1, limits.max_model_len - kept)));
    }
    r.mutable_token_ids()->mutable_ids()->Assign(ids.begin(), ids.end());
    requests.push_back(std::move(r));
  } else {
    for (const CompletionPrompt& p : g.prompts) {
      v1::GenerateRequest r;
      *r.mutable_sampling_params() = g.sampling;
      std::vector<int32_t> ids = p.ids;
      if (g.echo) {
        if (p.is_text) {
          ro.echo_texts.push_back(p.text);
          if (g.logprobs.has_value()) ids = engine.Tokenize(p.text, /*add_special_tokens=*/true);
        } else {
          absl::StatusOr<std::string> text = engine.Detokenize(p.ids, /*skip_special_tokens=*/false);
          if (!text.ok()) return ReplyError(endpoint, *exchange, FromStatus(text.status()));
          ro.echo_texts.push_back(*text);
        }
        ro.echo_ids.push_back(ids);
        // The echoed tokens' log-probs are the prompt's.
        if (g.logprobs.has_value()) {
          r.mutable_sampling_params()->set_prompt_logprobs(
              std::max<uint32_t>(r.sampling_params().prompt_logprobs(), *g.logprobs));
        }
      }
      if (p.is_text && !(g.echo && g.logprobs.has_value())) {
        r.set_text(p.text);
      } else {
        r.mutable_token_ids()->mutable_ids()->Assign(ids.begin(), ids.end());
      }
      requests.push_back(std::move(r));
    }
  }

  const std::string base = g.request_id.has_value()
                               ? *g.request_id
                               : absl::StrFormat("%016x", next_id_.fetch_add(1));
  ro.id = absl::StrCat(chat ? "chatcmpl-" : "cmpl-", base);
  ro.num_prompts = static_cast<int32_t>(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].set_request_id(requests.size() == 1 ? base : absl::StrCat(base, "-", i));
  }
  auto run = std::make_shared<CompletionRun>(
      std::move(ro), engine.tokenizer(), exchange,
      [&engine](const std::string& id) { engine.Abort(id); },
      [this, endpoint](int status) { Count(endpoint, status); });
  exchange->SetOnClose([weak = std::weak_ptr<CompletionRun>(run)] {
    if (auto r = weak.lock()) r->ClientGone();
  });
  std::vector<std::string> ids;
  for (size_t i = 0; i < requests.size(); ++i) {
    absl::StatusOr<std::string> id = engine.Submit(requests[i], run->SinkFor(static_cast<int32_t>(i)));
    if (!id.ok()) {
      return run->Refused(std::move(ids), FromStatus(id.status(), chat ? "messages" : "prompt"));
    }
    ids.push_back(*id);
  }
  run->Started(std::move(ids));
}

void OpenAiService::Tokenize(Engine& engine, const HttpRequest& request, HttpExchange& exchange) {
  const std::string endpoint = "/tokenize";
  Json body;
  if (auto e = ParseUtilityBody(request.body, options_.model_name, &body)) {
    return ReplyError(endpoint, exchange, *e);
  }
  std::vector<int32_t> ids;
  if (body.contains("messages")) {
    OpenAiGeneration g;
    if (auto e = ParseChatBody(body, &g)) return ReplyError(endpoint, exchange, *e);
    if (auto e = RenderChat(engine, g, &ids)) return ReplyError(endpoint, exchange, *e);
  } else {
    auto prompt = body.find("prompt");
    if (prompt == body.end() || !prompt->is_string()) {
      return ReplyError(endpoint, exchange,
                        InvalidField("prompt", "must be a string (or send chat messages)"));
    }
    bool add_special = true;
    if (auto a = body.find("add_special_tokens"); a != body.end() && !a->is_null()) {
      if (!a->is_boolean()) {
        return ReplyError(endpoint, exchange, InvalidField("add_special_tokens", "must be a boolean"));
      }
      add_special = a->get<bool>();
    }
    ids = engine.Tokenize(prompt->get<std::string>(), add_special);
  }
  Json out = {{"count", ids.size()},
              {"max_model_len", engine.ModelInfo().max_model_len()},
              {"tokens", ids},
              {"token_strs", nullptr}};
  if (auto r = body.find("return_token_strs"); r != body.end() && r->is_boolean() && r->get<bool>()) {
    Json strs = Json::array();
    for (int32_t id : ids) {
      const TokenId one[] = {id};
      strs.push_back(engine.tokenizer().Decode(one, /*skip_special_tokens=*/false));
    }
    out["token_strs"] = std::move(strs);
  }
  Reply(endpoint, exchange, 200, JsonText(out));
}

void OpenAiService::Detokenize(Engine& engine, const HttpRequest& request, HttpExchange& exchange) {
  const std::string endpoint = "/detokenize";
  Json body;
  if (auto e = ParseUtilityBody(request.body, options_.model_name, &body)) {
    return ReplyError(endpoint, exchange, *e);
  }
  auto tokens = body.find("tokens");
  std::vector<TokenId> ids;
  bool ok = tokens != body.end() && tokens->is_array();
  for (size_t i = 0; ok && i < tokens->size(); ++i) {
    const Json& t = (*tokens)[i];
    ok = t.is_number_integer() && t.get<int64_t>() >= INT32_MIN && t.get<int64_t>() <= INT32_MAX;
    if (ok) ids.push_back(static_cast<TokenId>(t.get<int64_t>()));
  }
  if (!ok) return ReplyError(endpoint, exchange, InvalidField("tokens", "must be a list of token ids"));
  absl::StatusOr<std::string> text = engine.Detokenize(ids, /*skip_special_tokens=*/false);
  if (!text.ok()) {
    OpenAiError e = FromStatus(text.status());
    e.param = "tokens";
    return ReplyError(endpoint, exchange, e);
  }
  Reply(endpoint, exchange, 200, JsonText(Json{{"prompt", *text}}));
}

}  // namespace folio
