#include "client/bench/openai_backend.h"

#include <chrono>
#include <exception>
#include <functional>
#include <limits>

#include "absl/strings/str_cat.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "nlohmann/json.hpp"

namespace folio::bench {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

class OpenAiBackend : public Backend {
 public:
  explicit OpenAiBackend(const BackendOptions& options) : options_(options) {
    const size_t colon = options.address.rfind(':');
    host_ = colon == std::string::npos ? options.address : options.address.substr(0, colon);
    port_ = colon == std::string::npos ? "80" : options.address.substr(colon + 1);
  }

  absl::StatusOr<ServerInfo> Probe() override {
    ServerInfo info;
    std::string error;
    std::string body;
    int status = 0;
    // Without the server's word on it, the vocabulary size stays unknown.
    Exchange(http::verb::get, "/v1/models", "", [&](const std::string& chunk) { body += chunk; },
             &status, &error);
    if (!error.empty()) return absl::UnavailableError(error);
    if (status != 200) return absl::UnavailableError(absl::StrCat("GET /v1/models: HTTP ", status, ": ", body));
    nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty()) {
      return absl::UnavailableError("GET /v1/models: not a model list: " + body);
    }
    const nlohmann::json& m = j["data"][0];
    info.model_name = m.value("id", "");
    info.max_model_len = m.value("max_model_len", 0);
    return info;
  }

  RequestRecord Send(const BenchRequest& request, const std::string& model_name) override {
    nlohmann::json body = {{"model", model_name},
                           {"max_tokens", request.output_len},
                           {"temperature", 0},
                           {"ignore_eos", true},
                           {"stream", true},
                           {"stream_options", {{"include_usage", true}}}};
    if (request.text.has_value()) {
      body["prompt"] = *request.text;
    } else {
      body["prompt"] = request.prompt_token_ids;
    }
    RequestRecord rec;
    std::string pending, error, raw;
    int status = 0;
    bool done = false, usage = false;
    const Clock::time_point sent = Clock::now();
    // Server-sent events: `data: {json}\n\n` ... `data: [DONE]\n\n`.
    auto on_event = [&](const std::string& event) {
      if (event.rfind("data: ", 0) != 0) return;
      const std::string data = event.substr(6);
      if (data == "[DONE]") {
        done = true;
        return;
      }
      nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
      if (j.is_discarded()) {
        if (error.empty()) error = "unparsable event: " + data;
        return;
      }
      if (j.contains("error")) {
        if (error.empty()) error = "error event: " + j["error"].dump();
        return;
      }
      if (j.contains("usage") && j["usage"].is_object()) {
        usage = true;
        rec.prompt_tokens = j["usage"].value("prompt_tokens", 0);
        rec.output_tokens = j["usage"].value("completion_tokens", 0);
      }
      if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
        const nlohmann::json& c = j["choices"][0];
        if (c.contains("text") && c["text"].is_string() && !c["text"].get<std::string>().empty()) {
          rec.token_times.push_back(SecondsSince(sent));
        }
      }
    };
    Exchange(http::verb::post, "/v1/completions", body.dump(), [&](const std::string& chunk) {
      if (status != 200) {
        raw += chunk;
        return;
      }
      pending += chunk;
      for (size_t end; (end = pending.find("\n\n")) != std::string::npos;) {
        on_event(pending.substr(0, end));
        pending.erase(0, end + 2);
      }
    }, &status, &error, [&](int s) { status = s; });
    rec.e2e = SecondsSince(sent);
    if (!rec.token_times.empty()) rec.ttft = rec.token_times.front();
    if (error.empty() && status != 200) error = absl::StrCat("HTTP ", status, ": ", raw);
    if (error.empty() && !done) error = "the stream ended without [DONE]";
    if (error.empty() && !usage) error = "no usage event";
    if (error.empty() && rec.output_tokens == 0) error = "no output token";
    rec.error = error;
    rec.success = error.empty();
    return rec;
  }

 private:
  // One request on a fresh connection; `on_body` gets the body as it
  // arrives, `on_status` the status once the header is in. Transport errors
  // land in *error. Beast's exceptions stop here.
  template <typename OnBody>
  void Exchange(http::verb verb, const std::string& target, const std::string& body, OnBody on_body,
                int* status, std::string* error, std::function<void(int)> on_status = nullptr) {
    try {
      asio::io_context io;
      tcp::resolver resolver(io);
      beast::tcp_stream stream(io);
      stream.connect(resolver.resolve(host_, port_));
      http::request<http::string_body> req(verb, target, 11);
      req.set(http::field::host, host_);
      req.set(http::field::user_agent, "folio-bench");
      if (!options_.api_key.empty()) req.set(http::field::authorization, "Bearer " + options_.api_key);
      if (verb == http::verb::post) {
        req.set(http::field::content_type, "application/json");
        req.body() = body;
        req.prepare_payload();
      }
      http::write(stream, req);
      beast::flat_buffer buffer;
      http::response_parser<http::buffer_body> parser;
      // Not boost::none: Boost 1.74 compares a Content-Length with it as "exceeded".
      parser.body_limit(std::numeric_limits<std::uint64_t>::max());
      http::read_header(stream, buffer, parser);
      *status = static_cast<int>(parser.get().result_int());
      if (on_status) on_status(*status);
      char chunk[16384];
      while (!parser.is_done()) {
        parser.get().body().data = chunk;
        parser.get().body().size = sizeof chunk;
        beast::error_code ec;
        http::read_some(stream, buffer, parser, ec);  // what has arrived: events as they come
        if (ec && ec != http::error::need_buffer) throw beast::system_error(ec);
        on_body(std::string(chunk, sizeof chunk - parser.get().body().size));
      }
      beast::error_code ignored;
      stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    } catch (const std::exception& e) {
      *error = absl::StrCat(std::string(http::to_string(verb)), " http://", options_.address, target, ": ", e.what());
    }
  }

  const BackendOptions options_;
  std::string host_, port_;
};

}  // namespace

std::unique_ptr<Backend> NewOpenAiBackend(const BackendOptions& options) {
  return std::make_unique<OpenAiBackend>(options);
}

}  // namespace folio::bench
