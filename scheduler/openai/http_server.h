#ifndef FOLIO_SCHEDULER_OPENAI_HTTP_SERVER_H_
#define FOLIO_SCHEDULER_OPENAI_HTTP_SERVER_H_

// folio-scheduler's HTTP/1.1 server, the transport under the OpenAI front
// end. Built on Boost.Beast/Asio (libboost-dev): a fixed pool of I/O threads
// runs every connection asynchronously, so thousands of concurrent SSE
// streams need no thread each. Beast parses and serializes every message;
// this file only wires connections, limits and timeouts to a handler.
//
// Per connection: keep-alive (HTTP/1.1), `Expect: 100-continue`, a body
// limit (413 beyond it), a header size limit (431), a deadline for a whole
// request to arrive (then the connection is closed: slow clients cannot
// hold it), an idle timeout between requests, a
// write timeout, and a bound on output queued for a client that does not
// read. Malformed HTTP gets 400 and the connection is closed; nothing a
// client sends can crash or stall the server.
//
// While a request is being answered the connection is watched: a client
// that closes it fires the exchange's on-close callback (the front end
// aborts the request and frees its KV blocks).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace folio {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query string
  std::string query;   // after '?', undecoded; empty when none
  std::string body;
  // Header names lower-cased, in arrival order.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string peer;  // "ip:port" of the client

  // The first header of that (lower-case) name; empty when absent.
  std::string_view Header(std::string_view lower_name) const;
};

// One request's answer. Either Respond() once, or StartStream() once, then
// Send() any number of times, then End(). Thread-safe: callable from any
// thread (the engine's included); every call only enqueues and returns.
// Calls after the client went away are dropped.
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;
  virtual void Respond(int status, std::string content_type, std::string body) = 0;
  // A chunked response (server-sent events use "text/event-stream").
  virtual void StartStream(int status, std::string content_type) = 0;
  virtual void Send(std::string data) = 0;
  virtual void End() = 0;
  // Called at most once, on an I/O thread, if the client goes away before
  // the answer is complete. Set it before anything can be sent.
  virtual void SetOnClose(std::function<void()> on_close) = 0;
};

// What answers requests. Handle runs on an I/O thread and must not block:
// it validates, enqueues work and returns; the answer may come later from
// any thread through the exchange.
class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  virtual void Handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) = 0;
  // The body (JSON) of an error the transport answers itself (400 for
  // malformed HTTP, 413, 431); content type application/json.
  virtual std::string TransportErrorBody(int status, std::string_view message) = 0;
};

class HttpServer {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    int port = 8000;  // 0: any free port (port() tells which)
    int num_threads = 2;
    int64_t max_body_bytes = 32 << 20;
    int64_t max_header_bytes = 64 << 10;
    absl::Duration request_timeout = absl::Seconds(30);  // a whole request, once it starts
    absl::Duration idle_timeout = absl::Seconds(60);     // keep-alive, between requests
    absl::Duration write_timeout = absl::Seconds(60);    // one write to a client
    int64_t max_queued_bytes = 16 << 20;  // unsent output of one exchange; beyond: closed
    // PEM files; both set: HTTPS. Checked at Start (errors name the flags).
    std::string tls_cert_file;
    std::string tls_key_file;
    std::string tls_client_ca_file;  // set: clients must present a certificate it signed
  };

  // Binds and starts the I/O threads. UNAVAILABLE when the address cannot
  // be bound; INVALID_ARGUMENT for bad TLS files. `handler` must outlive
  // the server.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const Options& options,
                                                           HttpHandler* handler);
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  ~HttpServer();  // Stop(absl::ZeroDuration())

  int port() const;
  bool tls() const;
  // Stops accepting, gives exchanges in progress up to `grace` to finish,
  // then closes every connection and joins the I/O threads. Idempotent.
  void Stop(absl::Duration grace);

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace folio

#endif  // FOLIO_SCHEDULER_OPENAI_HTTP_SERVER_H_
