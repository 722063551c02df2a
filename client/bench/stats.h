#ifndef FOLIO_CLIENT_BENCH_STATS_H_
#define FOLIO_CLIENT_BENCH_STATS_H_

// What `folio bench` measured: one record per request, and the summary its
// report prints (vLLM bench serve's figures).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace folio::bench {

// One request's timings. Times are seconds: send_time from the start of the
// run, the others from the request's send time.
struct RequestRecord {
  bool success = false;
  std::string error;             // why it failed
  double send_time = 0;
  double ttft = 0;               // first output token
  double e2e = 0;                // stream end
  std::vector<double> token_times;  // each token (or streamed chunk) arrival
  int32_t prompt_tokens = 0;
  int32_t output_tokens = 0;     // as the server counted them (its usage)
};

// Interpolated percentile (numpy's default, "linear") of `values`, p in
// [0, 100]; 0 for no values.
double Percentile(std::vector<double> values, double p);

struct Distribution {
  double mean = 0, median = 0, p90 = 0, p99 = 0;  // milliseconds
  static Distribution Of(const std::vector<double>& seconds);
};

// Service-level objectives for goodput (DistServe's measure, vLLM's
// --goodput): a request is good when it succeeded and meets every bound
// given, in milliseconds.
struct Slo {
  std::optional<double> ttft_ms, tpot_ms, e2el_ms;
  bool empty() const { return !ttft_ms && !tpot_ms && !e2el_ms; }
  bool Met(const struct RequestRecord& r) const;
};

// "ttft=500,tpot=50" (any of ttft, tpot, e2el; positive milliseconds).
// INVALID_ARGUMENT naming --slo and the bad part otherwise.
absl::StatusOr<Slo> ParseSlo(const std::string& text);

struct Summary {
  int32_t completed = 0, failed = 0;
  // With an SLO: requests that met it, and their rate.
  std::optional<Slo> slo;
  int32_t good = 0;
  double request_goodput = 0;
  double duration = 0;  // seconds, first send to last end
  int64_t total_input_tokens = 0, total_output_tokens = 0;
  double request_throughput = 0, input_throughput = 0, output_throughput = 0,
         total_token_throughput = 0;
  // TPOT per request with 2+ tokens: (e2e - ttft) / (output_tokens - 1).
  // ITL: the gaps between successive token arrivals of every request.
  Distribution ttft, tpot, itl, e2e;
  // Each request's end-to-end latency over its output tokens: the
  // PagedAttention paper's "normalized latency" (its Figure 12), in ms/token.
  Distribution normalized;
};

// Successful requests only count toward the latencies and token totals.
Summary Summarize(const std::vector<RequestRecord>& records, double duration,
                  const std::optional<Slo>& slo = std::nullopt);

// The time per output token of one request (0 with fewer than 2 tokens).
double Tpot(const RequestRecord& r);

// vLLM-style report text.
std::string FormatReport(const Summary& s);
nlohmann::json ToJson(const Summary& s);
nlohmann::json ToJson(const RequestRecord& r);

}  // namespace folio::bench

#endif  // FOLIO_CLIENT_BENCH_STATS_H_
