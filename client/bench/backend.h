#ifndef FOLIO_CLIENT_BENCH_BACKEND_H_
#define FOLIO_CLIENT_BENCH_BACKEND_H_

// How `folio bench` talks to a server: one implementation per protocol
// (grpc_backend.h, openai_backend.h).

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "client/bench/stats.h"
#include "client/bench/workload.h"

namespace folio::bench {

// Seconds from `t` to now on the steady clock: what every record's times are in.
inline double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

struct ServerInfo {
  std::string model_name;
  int32_t max_model_len = 0;
  int32_t vocab_size = 0;  // 0 = the server does not say
};

struct BackendOptions {
  std::string address;  // HOST:PORT
  std::string api_key;  // sent as `authorization: Bearer <key>` when set
  double timeout_s = 600;  // per request
};

// Thread-safe: Send runs on many threads at once.
class Backend {
 public:
  virtual ~Backend() = default;
  // The served model; an error when the server cannot be reached.
  virtual absl::StatusOr<ServerInfo> Probe() = 0;
  // Sends one request (greedy, ignore_eos, max_tokens = output_len) and
  // blocks until its stream ends. Times in the record are from `start`
  // (send_time) and from the send (the rest); success is false with an error
  // when the call or the sequence failed.
  virtual RequestRecord Send(const BenchRequest& request, const std::string& model_name) = 0;
};

}  // namespace folio::bench

#endif  // FOLIO_CLIENT_BENCH_BACKEND_H_
