#include "scheduler/kvsim/trace.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace folio::kvsim {
namespace {

struct LengthModel {
  double prompt_mean;
  double output_mean;
  double sigma;  // log-space spread; both datasets have long right tails
};

}  // namespace

int32_t DrawLogNormal(std::mt19937_64& rng, double mean, double sigma) {
  // E[X] = exp(mu + sigma^2 / 2), so mu follows from the wanted mean.
  std::lognormal_distribution<double> dist(std::log(mean) - sigma * sigma / 2.0, sigma);
  return std::max<int32_t>(1, static_cast<int32_t>(std::lround(dist(rng))));
}

double Trace::MeanPromptLen() const {
  double sum = 0;
  for (const TraceRequest& r : requests) sum += r.prompt_len;
  return requests.empty() ? 0.0 : sum / requests.size();
}

double Trace::MeanOutputLen() const {
  double sum = 0;
  for (const TraceRequest& r : requests) sum += r.output_len;
  return requests.empty() ? 0.0 : sum / requests.size();
}

absl::StatusOr<Trace> MakeSyntheticTrace(const std::string& name, int32_t num_requests,
                                         uint64_t seed, int32_t max_model_len) {
  LengthModel model;
  if (name == "sharegpt") {
    model = {161.31, 337.99, 1.0};
  } else if (name == "alpaca") {
    model = {19.31, 58.45, 0.6};
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--trace must be sharegpt, alpaca or a .jsonl file, not '", name, "'"));
  }
  if (num_requests <= 0) return absl::InvalidArgumentError("--num-requests must be positive");
  if (max_model_len < 2) return absl::InvalidArgumentError("--max-model-len must be at least 2");
  Trace trace;
  trace.name = name;
  std::mt19937_64 rng(seed);
  for (int32_t i = 0; i < num_requests; ++i) {
    TraceRequest r;
    r.prompt_len = std::min(DrawLogNormal(rng, model.prompt_mean, model.sigma), max_model_len - 1);
    r.output_len = std::min(DrawLogNormal(rng, model.output_mean, model.sigma),
                            max_model_len - r.prompt_len);
    trace.requests.push_back(r);
  }
  return trace;
}

absl::StatusOr<Trace> LoadTraceFile(const std::string& path, int32_t max_model_len) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is a directory, not a trace file"));
  }
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open trace file ", path));
  Trace trace;
  trace.name = path;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto where = [&] { return absl::StrCat(path, ":", line_no, ": "); };
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(where(), "not a JSON object"));
    }
    TraceRequest r;
    for (auto [key, field] : {std::pair{"prompt_len", &r.prompt_len},
                              std::pair{"output_len", &r.output_len}}) {
      if (!j.contains(key)) {
        return absl::InvalidArgumentError(absl::StrCat(where(), "missing ", key));
      }
      // Integers beyond 64 bits parse as floats: they are out of range, not fractional.
      if (j[key].is_number_float() && std::fabs(j[key].get<double>()) >= 9.2e18) {
        return absl::InvalidArgumentError(absl::StrCat(where(), key, " must be in [1, ",
                                                       max_model_len, "], got ", j[key].dump()));
      }
      if (!j[key].is_number_integer()) {
        return absl::InvalidArgumentError(absl::StrCat(where(), key, " must be an integer"));
      }
      const int64_t v = j[key].get<int64_t>();
      if (v < 1 || v > max_model_len) {
        return absl::InvalidArgumentError(
            absl::StrCat(where(), key, " must be in [1, ", max_model_len, "], got ", v));
      }
      *field = static_cast<int32_t>(v);
    }
    if (r.prompt_len + r.output_len > max_model_len) {
      return absl::InvalidArgumentError(absl::StrCat(where(), "prompt_len + output_len exceeds ",
                                                     "max_model_len ", max_model_len));
    }
    trace.requests.push_back(r);
  }
  if (trace.requests.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the trace holds no requests"));
  }
  return trace;
}

}  // namespace folio::kvsim
