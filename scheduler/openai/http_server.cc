#include "scheduler/openai/http_server.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/ssl.hpp"
#include "boost/asio/strand.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "boost/beast/ssl.hpp"

namespace folio {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;
using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

std::chrono::steady_clock::duration ToChrono(absl::Duration d) {
  return std::chrono::nanoseconds(absl::ToInt64Nanoseconds(d));
}

}  // namespace

std::string_view HttpRequest::Header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_name) return value;
  }
  return {};
}

class HttpServer::Impl {
 public:
  Impl(const Options& options, HttpHandler* handler)
      : options_(options), handler_(handler), acceptor_(ioc_) {}

  absl::Status Listen();
  void StartThreads();
  void Stop(absl::Duration grace);
  int port() const { return port_; }
  bool tls() const { return ssl_ctx_.has_value(); }

  const Options& options() const { return options_; }
  HttpHandler& handler() { return *handler_; }
  // Exchanges in progress, for a graceful Stop.
  void ExchangeBegan() { busy_.fetch_add(1); }
  void ExchangeEnded() {
    if (busy_.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      idle_cv_.notify_all();
    }
  }

 private:
  void Accept();

  const Options options_;
  HttpHandler* const handler_;
  net::io_context ioc_;
  std::optional<ssl::context> ssl_ctx_;
  tcp::acceptor acceptor_;
  std::vector<std::thread> threads_;
  int port_ = 0;
  std::atomic<int64_t> busy_{0};
  std::mutex mu_;
  std::condition_variable idle_cv_;
  bool stopped_ = false;  // guarded by mu_
};

namespace {

// One connection. Every member is touched only on the connection's strand
// (the stream's executor); exchanges reach it by posting there. It stays
// alive while an operation of its own is pending.
template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  template <class... Args>
  Session(HttpServer::Impl& server, tcp::socket socket, Args&&... args)
      : server_(server), stream_(std::move(socket), std::forward<Args>(args)...) {}

  void Run();
  auto executor() { return stream_.get_executor(); }

  // Exchange operations, posted to the strand. `seq` names the exchange;
  // calls of an exchange that is over are dropped.
  void Respond(uint64_t seq, int status, std::string content_type, std::string body);
  void StartStream(uint64_t seq, int status, std::string content_type);
  void Send(uint64_t seq, std::string data);
  void End(uint64_t seq);
  void SetOnClose(uint64_t seq, std::function<void()> on_close);

 private:
  enum class OutKind { kFull, kHeader, kChunk, kLast, kContinue };
  struct Out {
    OutKind kind;
    std::string data;            // kChunk
    std::shared_ptr<void> hold;  // the message or serializer being written
    std::function<void(std::shared_ptr<Session>, std::function<void(beast::error_code, size_t)>)>
        write;
  };

  auto& lowest() { return beast::get_lowest_layer(stream_); }
  bool Current(uint64_t seq) const { return !closed_ && handling_ && seq == seq_ && !answered_; }

  void ReadHeader();
  void OnHeader(beast::error_code ec);
  void ReadBody();
  void OnBody(beast::error_code ec);
  void Dispatch();
  void Watch();
  void OnWatch(beast::error_code ec, size_t n);
  // Answers a request the transport refuses itself, then closes.
  void Fail(int status, std::string_view message);
  template <class Message>
  void Enqueue(OutKind kind, std::shared_ptr<Message> message);
  void EnqueueChunk(std::string data);
  void DoWrite();
  void OnWrite(OutKind kind, beast::error_code ec);
  void ExchangeDone();
  void ClientGone();
  void CloseGracefully();
  void Discard();  // reads and drops until the client closes

  HttpServer::Impl& server_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool first_request_ = true;
  bool keep_alive_ = true;
  bool handling_ = false;   // a request is being answered
  bool answered_ = false;   // its last byte is queued
  bool streaming_ = false;  // StartStream was called
  uint64_t seq_ = 0;
  uint64_t gone_seq_ = 0;  // the exchange the client left in the middle of
  bool closed_ = false;
  bool watching_ = false;        // a watch read is pending
  bool read_after_watch_ = false;
  std::function<void()> on_close_;
  std::deque<Out> queue_;  // front() is being written while writing_
  bool writing_ = false;
  int64_t queued_bytes_ = 0;
};

template <class Stream>
class Exchange final : public HttpExchange {
 public:
  Exchange(std::weak_ptr<Session<Stream>> session, uint64_t seq)
      : session_(std::move(session)), seq_(seq) {}
  void Respond(int status, std::string content_type, std::string body) override {
    Post([status, seq = seq_, ct = std::move(content_type), b = std::move(body)](
             Session<Stream>& s) mutable { s.Respond(seq, status, std::move(ct), std::move(b)); });
  }
  void StartStream(int status, std::string content_type) override {
    Post([status, seq = seq_, ct = std::move(content_type)](Session<Stream>& s) mutable {
      s.StartStream(seq, status, std::move(ct));
    });
  }
  void Send(std::string data) override {
    Post([seq = seq_, d = std::move(data)](Session<Stream>& s) mutable { s.Send(seq, std::move(d)); });
  }
  void End() override {
    Post([seq = seq_](Session<Stream>& s) { s.End(seq); });
  }
  void SetOnClose(std::function<void()> on_close) override {
    Post([seq = seq_, f = std::move(on_close)](Session<Stream>& s) mutable {
      s.SetOnClose(seq, std::move(f));
    });
  }

 private:
  template <class F>
  void Post(F&& f) {
    std::shared_ptr<Session<Stream>> s = session_.lock();
    if (s == nullptr) return;
    auto executor = s->executor();
    net::post(executor, [s = std::move(s), f = std::forward<F>(f)]() mutable { f(*s); });
  }

  const std::weak_ptr<Session<Stream>> session_;
  const uint64_t seq_;
};

template <class Stream>
void Session<Stream>::Run() {
  // Start on the strand: the accept handler runs elsewhere.
  net::dispatch(executor(), [self = this->shared_from_this()] {
    if constexpr (std::is_same_v<Stream, TlsStream>) {
      self->lowest().expires_after(ToChrono(self->server_.options().request_timeout));
      self->stream_.async_handshake(ssl::stream_base::server, [self](beast::error_code ec) {
        if (ec) return;  // not TLS, or gone: nothing to answer
        self->ReadHeader();
      });
    } else {
      self->ReadHeader();
    }
  });
}

template <class Stream>
void Session<Stream>::ReadHeader() {
  if (closed_) return;
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(server_.options().max_header_bytes));
  parser_->body_limit(static_cast<uint64_t>(server_.options().max_body_bytes));
  // The first request may take the request timeout to arrive; later ones
  // wait for the idle timeout.
  lowest().expires_after(ToChrono(first_request_ ? server_.options().request_timeout
                                                 : server_.options().idle_timeout));
  first_request_ = false;
  http::async_read_header(stream_, buffer_, *parser_,
                          [self = this->shared_from_this()](beast::error_code ec, size_t) {
                            self->OnHeader(ec);
                          });
}

template <class Stream>
void Session<Stream>::OnHeader(beast::error_code ec) {
  if (ec == http::error::end_of_stream || ec == net::error::eof ||
      ec == net::error::operation_aborted || ec == beast::error::timeout ||
      ec == net::error::connection_reset || ec == ssl::error::stream_truncated) {
    return;  // closed or idle: nothing to answer
  }
  if (ec == http::error::header_limit) return Fail(431, "request headers too large");
  if (ec == http::error::body_limit) {
    return Fail(413, absl::StrCat("request body larger than the limit of ",
                                  server_.options().max_body_bytes, " bytes"));
  }
  if (ec) return Fail(400, absl::StrCat("malformed HTTP request: ", ec.message()));
  lowest().expires_after(ToChrono(server_.options().request_timeout));
  const auto& header = parser_->get();
  if (beast::iequals(header[http::field::expect], "100-continue") &&
      !parser_->is_done()) {
    auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
    Enqueue(OutKind::kContinue, cont);
    return;
  }
  ReadBody();
}

template <class Stream>
void Session<Stream>::ReadBody() {
  http::async_read(stream_, buffer_, *parser_,
                   [self = this->shared_from_this()](beast::error_code ec, size_t) {
                     self->OnBody(ec);
                   });
}

template <class Stream>
void Session<Stream>::OnBody(beast::error_code ec) {
  if (ec == http::error::body_limit) {
    return Fail(413, absl::StrCat("request body larger than the limit of ",
                                  server_.options().max_body_bytes, " bytes"));
  }
  // A timeout (beast has closed the socket by then) ends the connection too.
  if (ec == http::error::end_of_stream || ec == net::error::eof ||
      ec == net::error::operation_aborted || ec == net::error::connection_reset ||
      ec == ssl::error::stream_truncated || ec == beast::error::timeout) {
    return;
  }
  if (ec) return Fail(400, absl::StrCat("malformed HTTP request: ", ec.message()));
  Dispatch();
}

template <class Stream>
void Session<Stream>::Dispatch() {
  http::request<http::string_body> message = parser_->release();
  keep_alive_ = message.keep_alive();
  HttpRequest request;
  request.method = std::string(message.method_string());
  const std::string target(message.target());
  const size_t q = target.find('?');
  request.path = std::string(target.substr(0, q));
  if (q != std::string::npos) request.query = std::string(target.substr(q + 1));
  request.body = std::move(message.body());
  for (const auto& field : message) {
    request.headers.emplace_back(absl::AsciiStrToLower(std::string(field.name_string())),
                                 std::string(field.value()));
  }
  beast::error_code ep_ec;
  const tcp::endpoint peer = lowest().socket().remote_endpoint(ep_ec);
  if (!ep_ec) request.peer = absl::StrCat(peer.address().to_string(), ":", peer.port());

  ++seq_;
  handling_ = true;
  answered_ = false;
  streaming_ = false;
  on_close_ = nullptr;
  server_.ExchangeBegan();
  Watch();
  server_.handler().Handle(std::move(request),
                           std::make_shared<Exchange<Stream>>(this->weak_from_this(), seq_));
}

// A read while the answer is produced: it notices a client that closes the
// connection (the request is then aborted). Bytes of a pipelined request
// are kept for the next ReadHeader.
template <class Stream>
void Session<Stream>::Watch() {
  if (watching_ || closed_) return;
  watching_ = true;
  if (!writing_) lowest().expires_never();
  constexpr size_t kWatchBytes = 4096;
  stream_.async_read_some(buffer_.prepare(kWatchBytes),
                          [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                            self->OnWatch(ec, n);
                          });
}

template <class Stream>
void Session<Stream>::OnWatch(beast::error_code ec, size_t n) {
  watching_ = false;
  if (ec == net::error::operation_aborted && read_after_watch_) {
    read_after_watch_ = false;
    return ReadHeader();
  }
  if (ec) return ClientGone();
  buffer_.commit(n);
  if (static_cast<int64_t>(buffer_.size()) > server_.options().max_header_bytes) {
    return ClientGone();  // pipelining more than a request head while we answer
  }
  if (read_after_watch_) {
    read_after_watch_ = false;
    return ReadHeader();
  }
  if (handling_) Watch();
}

template <class Stream>
void Session<Stream>::Fail(int status, std::string_view message) {
  if (closed_) return;
  keep_alive_ = false;
  ++seq_;  // no exchange is current
  auto response = std::make_shared<http::response<http::string_body>>(
      static_cast<http::status>(status), 11);
  response->set(http::field::server, "folio");
  response->set(http::field::content_type, "application/json");
  response->keep_alive(false);
  response->body() = server_.handler().TransportErrorBody(status, message);
  response->prepare_payload();
  Enqueue(OutKind::kFull, response);
}

template <class Stream>
void Session<Stream>::Respond(uint64_t seq, int status, std::string content_type,
                              std::string body) {
  if (!Current(seq) || streaming_) return;
  answered_ = true;
  auto response = std::make_shared<http::response<http::string_body>>(
      static_cast<http::status>(status), 11);
  response->set(http::field::server, "folio");
  response->set(http::field::content_type, content_type);
  response->keep_alive(keep_alive_);
  response->body() = std::move(body);
  response->prepare_payload();
  Enqueue(OutKind::kFull, response);
}

template <class Stream>
void Session<Stream>::StartStream(uint64_t seq, int status, std::string content_type) {
  if (!Current(seq) || streaming_) return;
  streaming_ = true;
  auto response = std::make_shared<http::response<http::empty_body>>(
      static_cast<http::status>(status), 11);
  response->set(http::field::server, "folio");
  response->set(http::field::content_type, content_type);
  response->set(http::field::cache_control, "no-cache");
  response->keep_alive(keep_alive_);
  response->chunked(true);
  auto serializer = std::make_shared<http::response_serializer<http::empty_body>>(*response);
  Out out{OutKind::kHeader, {}, std::make_shared<std::pair<decltype(response), decltype(serializer)>>(
                                    response, serializer), nullptr};
  out.write = [serializer](std::shared_ptr<Session> self,
                           std::function<void(beast::error_code, size_t)> done) {
    http::async_write_header(self->stream_, *serializer, std::move(done));
  };
  queue_.push_back(std::move(out));
  DoWrite();
}

template <class Stream>
void Session<Stream>::Send(uint64_t seq, std::string data) {
  if (!Current(seq) || !streaming_ || data.empty()) return;
  queued_bytes_ += static_cast<int64_t>(data.size());
  if (queued_bytes_ > server_.options().max_queued_bytes) return ClientGone();  // not reading
  EnqueueChunk(std::move(data));
}

template <class Stream>
void Session<Stream>::End(uint64_t seq) {
  if (!Current(seq) || !streaming_) return;
  answered_ = true;
  Out out{OutKind::kLast, {}, nullptr, nullptr};
  out.write = [](std::shared_ptr<Session> self, std::function<void(beast::error_code, size_t)> done) {
    net::async_write(self->stream_, http::make_chunk_last(), std::move(done));
  };
  queue_.push_back(std::move(out));
  DoWrite();
}

template <class Stream>
void Session<Stream>::SetOnClose(uint64_t seq, std::function<void()> on_close) {
  if (closed_) {
    if (seq == gone_seq_) on_close();  // gone before the callback arrived
    return;
  }
  if (seq != seq_ || !handling_) return;
  on_close_ = std::move(on_close);
}

template <class Stream>
template <class Message>
void Session<Stream>::Enqueue(OutKind kind, std::shared_ptr<Message> message) {
  Out out{kind, {}, message, nullptr};
  out.write = [message](std::shared_ptr<Session> self,
                        std::function<void(beast::error_code, size_t)> done) {
    http::async_write(self->stream_, *message, std::move(done));
  };
  queue_.push_back(std::move(out));
  DoWrite();
}

template <class Stream>
void Session<Stream>::EnqueueChunk(std::string data) {
  // Events that pile up behind a write in flight leave as one chunk.
  if (!queue_.empty() && queue_.back().kind == OutKind::kChunk && (queue_.size() > 1 || !writing_)) {
    queue_.back().data += data;
    return;
  }
  Out out{OutKind::kChunk, std::move(data), nullptr, nullptr};
  queue_.push_back(std::move(out));
  DoWrite();
}

template <class Stream>
void Session<Stream>::DoWrite() {
  if (writing_ || queue_.empty() || closed_) return;
  writing_ = true;
  lowest().expires_after(ToChrono(server_.options().write_timeout));
  Out& out = queue_.front();
  auto done = [self = this->shared_from_this(), kind = out.kind](beast::error_code ec, size_t) {
    self->OnWrite(kind, ec);
  };
  if (out.kind == OutKind::kChunk) {
    net::async_write(stream_, http::make_chunk(net::buffer(out.data)), std::move(done));
  } else {
    out.write(this->shared_from_this(), std::move(done));
  }
}

template <class Stream>
void Session<Stream>::OnWrite(OutKind kind, beast::error_code ec) {
  writing_ = false;
  if (!queue_.empty()) {
    queued_bytes_ -= static_cast<int64_t>(queue_.front().data.size());
    queue_.pop_front();
  }
  if (ec) return ClientGone();
  switch (kind) {
    case OutKind::kContinue:
      ReadBody();
      break;
    case OutKind::kFull:
    case OutKind::kLast:
      ExchangeDone();
      break;
    default:
      break;
  }
  DoWrite();
}

template <class Stream>
void Session<Stream>::ExchangeDone() {
  if (handling_) {
    handling_ = false;
    on_close_ = nullptr;
    server_.ExchangeEnded();
  }
  if (!keep_alive_) return CloseGracefully();
  if (watching_) {
    read_after_watch_ = true;
    lowest().cancel();  // only the watch read is pending; OnWatch reads on
  } else {
    ReadHeader();
  }
}

template <class Stream>
void Session<Stream>::ClientGone() {
  if (closed_) return;
  closed_ = true;
  // A write in flight still reads the front message: it goes in OnWrite.
  queue_.erase(writing_ ? queue_.begin() + 1 : queue_.begin(), queue_.end());
  queued_bytes_ = writing_ ? static_cast<int64_t>(queue_.front().data.size()) : 0;
  if (handling_) {
    handling_ = false;
    gone_seq_ = seq_;
    std::function<void()> on_close = std::move(on_close_);
    on_close_ = nullptr;
    server_.ExchangeEnded();
    if (on_close) on_close();
  }
  beast::error_code ec;
  lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
  lowest().close();
}

template <class Stream>
void Session<Stream>::CloseGracefully() {
  closed_ = true;
  if constexpr (std::is_same_v<Stream, TlsStream>) {
    lowest().expires_after(std::chrono::seconds(2));
    stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {
      self->lowest().close();
    });
  } else {
    // A lingering close: a client still sending (a body we refused with
    // 413) reads our answer instead of a reset. Discard its bytes until it
    // closes, for at most two seconds.
    beast::error_code ec;
    lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
    auto timer = std::make_shared<net::steady_timer>(executor(), std::chrono::seconds(2));
    timer->async_wait([self = this->shared_from_this(), timer](beast::error_code) {
      self->lowest().close();
    });
    if (!watching_) Discard();
  }
}

template <class Stream>
void Session<Stream>::Discard() {
  buffer_.consume(buffer_.size());
  lowest().socket().async_read_some(
      buffer_.prepare(16 << 10), [self = this->shared_from_this()](beast::error_code ec, size_t) {
        if (!ec) self->Discard();
      });
}

}  // namespace

absl::Status HttpServer::Impl::Listen() {
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(options_.host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("--host '", options_.host, "' is not an IP address: ", ec.message()));
  }
  if (!options_.tls_cert_file.empty() || !options_.tls_key_file.empty()) {
    if (options_.tls_cert_file.empty() || options_.tls_key_file.empty()) {
      return absl::InvalidArgumentError("HTTPS needs both --tls-cert and --tls-key");
    }
    ssl_ctx_.emplace(ssl::context::tls_server);
    ssl_ctx_->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                          ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                          ssl::context::no_tlsv1_1);
    ssl_ctx_->use_certificate_chain_file(options_.tls_cert_file, ec);
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls-cert ", options_.tls_cert_file, ": ", ec.message()));
    }
    ssl_ctx_->use_private_key_file(options_.tls_key_file, ssl::context::pem, ec);
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls-key ", options_.tls_key_file, ": ", ec.message()));
    }
    if (!options_.tls_client_ca_file.empty()) {  // mutual TLS, as on the gRPC port
      ssl_ctx_->load_verify_file(options_.tls_client_ca_file, ec);
      if (ec) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--tls-client-ca ", options_.tls_client_ca_file, ": ", ec.message()));
      }
      ssl_ctx_->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    }
  }
  const tcp::endpoint endpoint(address, static_cast<uint16_t>(options_.port));
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("HTTP: cannot listen on ", options_.host, ":",
                                               options_.port, ": ", ec.message()));
  }
  port_ = acceptor_.local_endpoint().port();
  return absl::OkStatus();
}

void HttpServer::Impl::Accept() {
  acceptor_.async_accept(net::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) {
      beast::error_code nodelay_ec;
      socket.set_option(tcp::no_delay(true), nodelay_ec);
      if (ssl_ctx_.has_value()) {
        std::make_shared<Session<TlsStream>>(*this, std::move(socket), *ssl_ctx_)->Run();
      } else {
        std::make_shared<Session<PlainStream>>(*this, std::move(socket))->Run();
      }
    }
    Accept();  // out of descriptors etc.: try again with the next connection
  });
}

void HttpServer::Impl::StartThreads() {
  Accept();
  for (int i = 0; i < std::max(1, options_.num_threads); ++i) {
    threads_.emplace_back([this] { ioc_.run(); });
  }
}

void HttpServer::Impl::Stop(absl::Duration grace) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    net::post(ioc_, [this] {
      beast::error_code ec;
      acceptor_.close(ec);
    });
    idle_cv_.wait_for(lock, ToChrono(grace), [&] { return busy_.load() == 0; });
  }
  ioc_.stop();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() { Stop(absl::ZeroDuration()); }

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const Options& options,
                                                              HttpHandler* handler) {
  auto impl = std::make_unique<Impl>(options, handler);
  if (absl::Status st = impl->Listen(); !st.ok()) return st;
  impl->StartThreads();
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

int HttpServer::port() const { return impl_->port(); }
bool HttpServer::tls() const { return impl_->tls(); }
void HttpServer::Stop(absl::Duration grace) { impl_->Stop(grace); }

}  // namespace folio
