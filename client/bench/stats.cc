#include "client/bench/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace folio::bench {

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (rank - static_cast<double>(lo));
}

Distribution Distribution::Of(const std::vector<double>& seconds) {
  Distribution d;
  if (seconds.empty()) return d;
  d.mean = 1000 * std::accumulate(seconds.begin(), seconds.end(), 0.0) / seconds.size();
  d.median = 1000 * Percentile(seconds, 50);
  d.p90 = 1000 * Percentile(seconds, 90);
  d.p99 = 1000 * Percentile(seconds, 99);
  return d;
}

double Tpot(const RequestRecord& r) {
  if (r.output_tokens < 2) return 0;
  return (r.e2e - r.ttft) / (r.output_tokens - 1);
}

bool Slo::Met(const RequestRecord& r) const {
  if (!r.success) return false;
  if (ttft_ms && 1000 * r.ttft > *ttft_ms) return false;
  if (tpot_ms && 1000 * Tpot(r) > *tpot_ms) return false;
  if (e2el_ms && 1000 * r.e2e > *e2el_ms) return false;
  return true;
}

absl::StatusOr<Slo> ParseSlo(const std::string& text) {
  Slo slo;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    const std::vector<std::string> kv = absl::StrSplit(part, '=');
    double ms = 0;
    if (kv.size() != 2 || !absl::SimpleAtod(kv[1], &ms) || !(ms > 0) || !std::isfinite(ms)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--slo: '", std::string(part), "' is not NAME=MILLISECONDS with a positive number"));
    }
    std::optional<double>* slot = kv[0] == "ttft" ? &slo.ttft_ms
                                  : kv[0] == "tpot" ? &slo.tpot_ms
                                  : kv[0] == "e2el" ? &slo.e2el_ms
                                                    : nullptr;
    if (slot == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--slo: unknown metric '", kv[0], "' (ttft, tpot or e2el)"));
    }
    *slot = ms;
  }
  if (slo.empty()) return absl::InvalidArgumentError("--slo: give at least one of ttft, tpot, e2el");
  return slo;
}

Summary Summarize(const std::vector<RequestRecord>& records, double duration,
                  const std::optional<Slo>& slo) {
  Summary s;
  s.duration = duration;
  s.slo = slo;
  std::vector<double> ttft, tpot, itl, e2e, normalized;
  for (const RequestRecord& r : records) {
    if (!r.success) {
      ++s.failed;
      continue;
    }
    ++s.completed;
    if (slo && slo->Met(r)) ++s.good;
    s.total_input_tokens += r.prompt_tokens;
    s.total_output_tokens += r.output_tokens;
    ttft.push_back(r.ttft);
    e2e.push_back(r.e2e);
    if (r.output_tokens > 1) tpot.push_back(Tpot(r));
    if (r.output_tokens > 0) normalized.push_back(r.e2e / r.output_tokens);
    // One gap per message after the first, as vLLM's bench counts ITL: the
    // tokens of one message (folio-scheduler --stream-interval) share its
    // arrival time.
    for (size_t i = 1; i < r.token_times.size(); ++i) {
      const double gap = r.token_times[i] - r.token_times[i - 1];
      if (gap != 0) itl.push_back(gap);
    }
  }
  if (duration > 0) {
    s.request_throughput = s.completed / duration;
    s.request_goodput = s.good / duration;
    s.input_throughput = s.total_input_tokens / duration;
    s.output_throughput = s.total_output_tokens / duration;
    s.total_token_throughput = (s.total_input_tokens + s.total_output_tokens) / duration;
  }
  s.ttft = Distribution::Of(ttft);
  s.tpot = Distribution::Of(tpot);
  s.itl = Distribution::Of(itl);
  s.e2e = Distribution::Of(e2e);
  s.normalized = Distribution::Of(normalized);
  return s;
}

std::string FormatReport(const Summary& s) {
  std::string out = absl::StrFormat("%s\n", std::string(18, '=') + " Serving Benchmark Result " + std::string(18, '='));
  auto line = [&](const char* name, const std::string& value) {
    absl::StrAppendFormat(&out, "%-40s %s\n", name, value);
  };
  auto fixed = [](double v) { return absl::StrFormat("%.2f", v); };
  line("Successful requests:", absl::StrCat(s.completed));
  line("Failed requests:", absl::StrCat(s.failed));
  line("Benchmark duration (s):", fixed(s.duration));
  line("Total input tokens:", absl::StrCat(s.total_input_tokens));
  line("Total generated tokens:", absl::StrCat(s.total_output_tokens));
  line("Request throughput (req/s):", fixed(s.request_throughput));
  if (s.slo) line("Request goodput (req/s):", fixed(s.request_goodput));
  line("Input token throughput (tok/s):", fixed(s.input_throughput));
  line("Output token throughput (tok/s):", fixed(s.output_throughput));
  line("Total token throughput (tok/s):", fixed(s.total_token_throughput));
  auto section = [&](const std::string& title, const std::string& short_name, const Distribution& d) {
    const std::string head = " " + title + " ";
    const size_t pad = 50 - std::min<size_t>(head.size(), 50);
    out += std::string(pad / 2, '-') + head + std::string(pad - pad / 2, '-') + "\n";
    line(("Mean " + short_name + " (ms):").c_str(), fixed(d.mean));
    line(("Median " + short_name + " (ms):").c_str(), fixed(d.median));
    line(("P90 " + short_name + " (ms):").c_str(), fixed(d.p90));
    line(("P99 " + short_name + " (ms):").c_str(), fixed(d.p99));
  };
  section("Time to First Token", "TTFT", s.ttft);
  section("Time per Output Token (excl. 1st token)", "TPOT", s.tpot);
  section("Inter-token Latency", "ITL", s.itl);
  section("End-to-end Latency", "E2EL", s.e2e);
  line("Mean normalized latency (ms/token):", fixed(s.normalized.mean));
  out += std::string(50, '=') + "\n";
  return out;
}

namespace {
nlohmann::json ToJson(const Distribution& d) {
  return {{"mean", d.mean}, {"median", d.median}, {"p90", d.p90}, {"p99", d.p99}};
}
}  // namespace

nlohmann::json ToJson(const Summary& s) {
  nlohmann::json j = {{"completed", s.completed},
          {"failed", s.failed},
          {"duration_s", s.duration},
          {"total_input_tokens", s.total_input_tokens},
          {"total_output_tokens", s.total_output_tokens},
          {"request_throughput", s.request_throughput},
          {"input_throughput", s.input_throughput},
          {"output_throughput", s.output_throughput},
          {"total_token_throughput", s.total_token_throughput},
          {"ttft_ms", ToJson(s.ttft)},
          {"tpot_ms", ToJson(s.tpot)},
          {"itl_ms", ToJson(s.itl)},
          {"e2el_ms", ToJson(s.e2e)},
          {"normalized_latency_ms", ToJson(s.normalized)}};
  if (s.slo) {
    nlohmann::json slo = nlohmann::json::object();
    if (s.slo->ttft_ms) slo["ttft_ms"] = *s.slo->ttft_ms;
    if (s.slo->tpot_ms) slo["tpot_ms"] = *s.slo->tpot_ms;
    if (s.slo->e2el_ms) slo["e2el_ms"] = *s.slo->e2el_ms;
    j["slo"] = std::move(slo);
    j["good_requests"] = s.good;
    j["request_goodput"] = s.request_goodput;
  }
  return j;
}

nlohmann::json ToJson(const RequestRecord& r) {
  nlohmann::json j = {{"success", r.success},
                      {"send_time_s", r.send_time},
                      {"ttft_s", r.ttft},
                      {"e2e_s", r.e2e},
                      {"token_times_s", r.token_times},
                      {"prompt_tokens", r.prompt_tokens},
                      {"output_tokens", r.output_tokens}};
  if (!r.error.empty()) j["error"] = r.error;
  return j;
}

}  // namespace folio::bench
