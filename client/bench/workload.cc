#include "client/bench/workload.h"

#include <cmath>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "scheduler/kvsim/trace.h"

namespace folio::bench {
namespace {

std::vector<int32_t> RandomIds(int32_t len, int32_t vocab, std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> id(0, std::max(vocab - 2, 1) - 1);
  std::vector<int32_t> ids(len);
  for (int32_t& t : ids) t = id(rng);
  return ids;
}

absl::StatusOr<std::vector<BenchRequest>> LoadJsonl(const WorkloadOptions& o) {
  std::ifstream in(o.dataset);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--dataset: cannot open ", o.dataset));
  std::vector<BenchRequest> lines;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = absl::StrCat("--dataset ", o.dataset, ":", n, ": ");
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError(where + "not a JSON object");
    BenchRequest r;
    r.output_len = o.output_len;
    if (j.contains("prompt") && j["prompt"].is_string()) {
      r.text = j["prompt"].get<std::string>();
    } else if (j.contains("prompt_token_ids") && j["prompt_token_ids"].is_array()) {
      for (const auto& v : j["prompt_token_ids"]) {
        if (!v.is_number_integer()) {
          return absl::InvalidArgumentError(where + "prompt_token_ids must hold integers");
        }
        r.prompt_token_ids.push_back(v.get<int32_t>());
      }
    } else {
      return absl::InvalidArgumentError(
          where + "needs \"prompt\" (a string) or \"prompt_token_ids\" (integers)");
    }
    if (j.contains("output_len")) {
      if (!j["output_len"].is_number_integer() || j["output_len"].get<int64_t>() < 1) {
        return absl::InvalidArgumentError(where + "output_len must be a positive integer");
      }
      r.output_len = j["output_len"].get<int32_t>();
    }
    lines.push_back(std::move(r));
  }
  if (lines.empty()) return absl::InvalidArgumentError(absl::StrCat("--dataset ", o.dataset, " holds no prompts"));
  std::vector<BenchRequest> out;
  for (int32_t i = 0; i < o.num_prompts; ++i) out.push_back(lines[i % lines.size()]);
  return out;
}

}  // namespace

absl::StatusOr<std::vector<BenchRequest>> MakeWorkload(const WorkloadOptions& o) {
  if (o.num_prompts < 1) return absl::InvalidArgumentError("--num-prompts must be at least 1");
  if (o.output_len < 1) return absl::InvalidArgumentError("--output-len must be at least 1");
  if (o.dataset != "random" && o.dataset != "sharegpt" && o.dataset != "alpaca") {
    return LoadJsonl(o);
  }
  if (o.vocab_size < 3) return absl::InvalidArgumentError("--vocab-size must be at least 3");
  std::mt19937_64 rng(o.seed);
  std::vector<BenchRequest> out;
  if (o.dataset == "random") {
    if (o.input_len < 1) return absl::InvalidArgumentError("--input-len must be at least 1");
    if (o.max_model_len > 0 && o.input_len + o.output_len > o.max_model_len) {
      return absl::InvalidArgumentError(absl::StrCat("--input-len + --output-len (", o.input_len + o.output_len,
                                                     ") exceed the server's max_model_len ", o.max_model_len));
    }
    for (int32_t i = 0; i < o.num_prompts; ++i) {
      out.push_back({std::nullopt, RandomIds(o.input_len, o.vocab_size, rng), o.output_len});
    }
    return out;
  }
  absl::StatusOr<kvsim::Trace> trace = kvsim::MakeSyntheticTrace(
      o.dataset, o.num_prompts, o.seed, o.max_model_len > 0 ? o.max_model_len : 1 << 20);
  if (!trace.ok()) return absl::InvalidArgumentError(absl::StrCat("--dataset: ", trace.status().message()));
  for (const kvsim::TraceRequest& t : trace->requests) {
    out.push_back({std::nullopt, RandomIds(std::max(t.prompt_len, 1), o.vocab_size, rng),
                   std::max(t.output_len, 1)});
  }
  return out;
}

std::vector<double> ArrivalTimes(int32_t num_requests, double rate, uint64_t seed) {
  std::vector<double> times(std::max(num_requests, 0), 0.0);
  if (!std::isfinite(rate)) return times;
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  std::exponential_distribution<double> gap(rate);
  double t = 0;
  for (double& x : times) {
    x = t;
    t += gap(rng);
  }
  return times;
}

}  // namespace folio::bench
