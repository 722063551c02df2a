#ifndef FOLIO_SCHEDULER_KVSIM_TRACE_H_
#define FOLIO_SCHEDULER_KVSIM_TRACE_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace folio::kvsim {

// One request of a replayed workload: only the lengths matter to memory.
struct TraceRequest {
  int32_t prompt_len = 0;
  int32_t output_len = 0;
};

struct Trace {
  std::string name;
  std::vector<TraceRequest> requests;

  double MeanPromptLen() const;
  double MeanOutputLen() const;
};

// A length drawn from a log-normal distribution with this mean and log-space
// spread, at least 1.
int32_t DrawLogNormal(std::mt19937_64& rng, double mean, double sigma);

// Synthetic traces with the length statistics of the paper's datasets:
// "sharegpt" (input mean 161, output mean 338) and "alpaca" (19 and 58).
// Lengths are log-normal with those means, seeded, and capped so that
// prompt + output <= max_model_len.
absl::StatusOr<Trace> MakeSyntheticTrace(const std::string& name, int32_t num_requests,
                                         uint64_t seed, int32_t max_model_len);

// A JSONL file, one {"prompt_len": P, "output_len": O} per line. Lines that
// exceed max_model_len are an error naming the line.
absl::StatusOr<Trace> LoadTraceFile(const std::string& path, int32_t max_model_len);

}  // namespace folio::kvsim

#endif  // FOLIO_SCHEDULER_KVSIM_TRACE_H_
