#ifndef FOLIO_SCHEDULER_OPENAI_OPENAI_SERVICE_H_
#define FOLIO_SCHEDULER_OPENAI_OPENAI_SERVICE_H_

// The OpenAI-compatible HTTP API of folio-scheduler (docs/api.md): a second
// door into the same engine as folio.v1.Generation. Each request becomes
// GenerateRequests submitted through Engine::Submit, so validation, limits
// and metrics are the gRPC path's. Routes:
//
//   POST /v1/completions, /v1/chat/completions   (stream: server-sent events)
//   GET  /v1/models, /health, /version, /metrics
//   POST /tokenize, /detokenize                   (vLLM's shapes)
//
// With an API key every route but /health and /metrics needs
// `Authorization: Bearer <key>` (constant-time compare, 401 otherwise).
// Counts every answer in folio_http_requests_total{endpoint,code}.
//
// Thread-safe. Until set_engine() every route but /health and /metrics
// answers 503; the engine must outlive its use.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "common/chat_template.h"
#include "scheduler/openai/http_server.h"
#include "scheduler/openai/openai_error.h"
#include "scheduler/server/engine.h"

namespace prometheus {
class Counter;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace folio {

struct OpenAiGeneration;

class OpenAiService final : public HttpHandler {
 public:
  struct Options {
    std::string model_name;  // the served name: `model` must be this or absent
    std::string model_root;  // /v1/models "root": the model directory
    std::string version;
    std::string api_key;  // empty: no key
    // /metrics serves it; folio_http_requests_total is registered in it.
    // Null: no /metrics and no counting.
    std::shared_ptr<prometheus::Registry> registry;
  };
  // `chat_template` may be null: chat requests then answer 400 with
  // `no_template_reason`.
  OpenAiService(Options options, std::unique_ptr<ChatTemplate> chat_template,
                std::string no_template_reason);
  OpenAiService(const OpenAiService&) = delete;
  OpenAiService& operator=(const OpenAiService&) = delete;
  ~OpenAiService() override;

  void set_engine(Engine* engine) { engine_.store(engine); }

  void Handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) override;
  std::string TransportErrorBody(int status, std::string_view message) override;

 private:
  // Answers with a JSON body (or an error) and counts it.
  void Reply(const std::string& endpoint, HttpExchange& exchange, int status, std::string body,
             std::string content_type = "application/json");
  void ReplyError(const std::string& endpoint, HttpExchange& exchange, const OpenAiError& error);
  void Count(const std::string& endpoint, int status);
  bool Authorized(const HttpRequest& request) const;

  void Generate(Engine& engine, const HttpRequest& request, bool chat,
                std::shared_ptr<HttpExchange> exchange);
  // Chat: the template-rendered prompt's token ids (continue / generation
  // prompt as asked); 400s name the field or carry the template's message.
  std::optional<OpenAiError> RenderChat(Engine& engine, const OpenAiGeneration& g,
                                        std::vector<int32_t>* ids) const;
  void Models(Engine& engine, HttpExchange& exchange);
  void Tokenize(Engine& engine, const HttpRequest& request, HttpExchange& exchange);
  void Detokenize(Engine& engine, const HttpRequest& request, HttpExchange& exchange);

  const Options options_;
  const std::unique_ptr<ChatTemplate> chat_template_;
  const std::string no_template_reason_;
  const int64_t created_;  // unix seconds at start, /v1/models "created"
  std::atomic<Engine*> engine_{nullptr};
  std::atomic<uint64_t> next_id_{0};

  prometheus::Family<prometheus::Counter>* requests_family_ = nullptr;
  std::mutex counters_mu_;
  absl::flat_hash_map<std::string, prometheus::Counter*> counters_;  // "endpoint code"
};

}  // namespace folio

#endif  // FOLIO_SCHEDULER_OPENAI_OPENAI_SERVICE_H_
