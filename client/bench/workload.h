#ifndef FOLIO_CLIENT_BENCH_WORKLOAD_H_
#define FOLIO_CLIENT_BENCH_WORKLOAD_H_

// The requests of a `folio bench` run and when each is sent.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace folio::bench {

// One benchmark request: a prompt (token ids, or text for a JSONL "prompt")
// and exactly how many tokens to generate (sent with ignore_eos).
struct BenchRequest {
  std::optional<std::string> text;       // set for text prompts
  std::vector<int32_t> prompt_token_ids;  // otherwise
  int32_t output_len = 0;
};

struct WorkloadOptions {
  // "random", "sharegpt", "alpaca" (synthetic lengths, scheduler/kvsim/trace.h)
  // or a JSONL file: {"prompt": "..."} or {"prompt_token_ids": [...]}, with an
  // optional "output_len" (else output_len below). Files are used in order,
  // repeated when shorter than num_prompts.
  std::string dataset = "random";
  int32_t num_prompts = 0;
  int32_t input_len = 1024;  // random only
  int32_t output_len = 128;  // random, and JSONL lines without "output_len"
  uint64_t seed = 0;
  // Random token ids are drawn from [0, vocab_size - 2): the top two ids are
  // often special (the demo model's are).
  int32_t vocab_size = 0;
  int32_t max_model_len = 0;  // prompt + output must fit; 0 = unchecked
};

// The requests, or INVALID_ARGUMENT naming the flag or file line at fault.
absl::StatusOr<std::vector<BenchRequest>> MakeWorkload(const WorkloadOptions& options);

// Send times in seconds from the start, one per request: all 0 for an
// infinite rate, else a Poisson process of `rate` requests/s (exponential
// gaps), seeded.
std::vector<double> ArrivalTimes(int32_t num_requests, double rate, uint64_t seed);

}  // namespace folio::bench

#endif  // FOLIO_CLIENT_BENCH_WORKLOAD_H_
