// `folio bench`: the serving benchmark client (the role of vLLM's `bench
// serve`). Sends --num-prompts requests to a running cluster over gRPC or the
// OpenAI HTTP API, at --request-rate (Poisson arrivals; inf = all at once)
// and/or at most --max-concurrency in flight, each greedy with ignore_eos so
// output lengths are exact, and reports throughput and TTFT / TPOT / ITL /
// E2E latency percentiles; --json FILE also writes per-request timings.
//
// One thread per in-flight request: --max-concurrency threads, or up to
// kMaxThreads when only a finite --request-rate bounds them.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "client/bench/grpc_backend.h"
#include "client/bench/openai_backend.h"
#include "client/bench/stats.h"
#include "client/bench/workload.h"
#include "client/commands.h"
#include "common/flags.h"

namespace folio {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxThreads = 512;

constexpr char kBenchUsage[] =
    "usage: folio bench --backend grpc|openai --address HOST:PORT --num-prompts N\n"
    "                   (--request-rate R | --max-concurrency C) [--json FILE] [flags]\n"
    "Benchmarks a running folio cluster (folio serve) like vLLM's bench serve.\n"
    "Exit status: 0 when every request succeeded, 1 when some failed or the server\n"
    "cannot be reached, 2 for bad flags.\n";

int BadFlag(const std::string& message) {
  std::fprintf(stderr, "folio bench: %s\n%s", message.c_str(), kBenchUsage);
  return 2;
}

}  // namespace

int BenchMain(int argc, char** argv) {
  std::string backend_name = "grpc", address, api_key, dataset = "random", request_rate = "inf",
              json_path, slo_text;
  int64_t num_prompts = 1000, max_concurrency = 0, input_len = 1024, output_len = 128, seed = 0,
          vocab_size = 0;
  double timeout_s = 600;
  FlagSet flags;
  flags.String("backend", &backend_name, "grpc (folio.v1.Generation) or openai (/v1/completions)");
  flags.String("address", &address, "HOST:PORT of the scheduler's gRPC or HTTP port "
                                    "(default 127.0.0.1:50051 for grpc, :8000 for openai)");
  flags.String("api-key", &api_key, "sent as `authorization: Bearer <key>`");
  flags.Int("num-prompts", &num_prompts, "requests to send");
  flags.String("request-rate", &request_rate, "requests/s (Poisson arrivals); inf = all at once");
  flags.Int("max-concurrency", &max_concurrency, "requests in flight at most (0 = unbounded)");
  flags.String("dataset", &dataset, "random, sharegpt, alpaca (synthetic lengths) or FILE.jsonl "
                                    "({\"prompt\"} or {\"prompt_token_ids\"}, optional \"output_len\")");
  flags.Int("input-len", &input_len, "prompt tokens of --dataset random");
  flags.Int("output-len", &output_len, "output tokens (random, and JSONL lines without output_len)");
  flags.Int("seed", &seed, "seeds prompts and arrivals");
  flags.Int("vocab-size", &vocab_size, "random token ids are below this minus 2 (0 = ask the server)");
  flags.Double("timeout-s", &timeout_s, "deadline of each request");
  flags.String("json", &json_path, "write the summary and per-request timings to this file");
  flags.String("slo", &slo_text,
               "goodput objectives in ms, e.g. ttft=500,tpot=50 (ttft, tpot, e2el): requests/s "
               "meeting all of them");
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::printf("%s%s", kBenchUsage, flags.Help().c_str());
      return 0;
    }
  }
  if (absl::Status s = flags.Parse(argc, argv, 0); !s.ok()) return BadFlag(std::string(s.message()));
  if (!flags.positional().empty()) return BadFlag("unexpected argument '" + flags.positional()[0] + "'");
  std::optional<bench::Slo> slo;
  if (!slo_text.empty()) {
    absl::StatusOr<bench::Slo> parsed = bench::ParseSlo(slo_text);
    if (!parsed.ok()) return BadFlag(std::string(parsed.status().message()));
    slo = *parsed;
  }
  if (backend_name != "grpc" && backend_name != "openai") {
    return BadFlag("--backend must be grpc or openai, got '" + backend_name + "'");
  }
  if (address.empty()) address = backend_name == "grpc" ? "127.0.0.1:50051" : "127.0.0.1:8000";
  double rate = std::numeric_limits<double>::infinity();
  if (request_rate != "inf" && (!absl::SimpleAtod(request_rate, &rate) || !(rate > 0))) {
    return BadFlag("--request-rate needs a positive number or inf, got '" + request_rate + "'");
  }
  if (num_prompts < 1 || num_prompts > 10'000'000) return BadFlag("--num-prompts must be in [1, 1e7]");
  if (max_concurrency < 0) return BadFlag("--max-concurrency must be >= 0");
  if (input_len < 1 || input_len > INT32_MAX) return BadFlag("--input-len must be at least 1");
  if (output_len < 1 || output_len > INT32_MAX) return BadFlag("--output-len must be at least 1");
  if (vocab_size < 0 || vocab_size > INT32_MAX) return BadFlag("--vocab-size must be >= 0");
  if (!(timeout_s > 0)) return BadFlag("--timeout-s must be positive");

  bench::BackendOptions options{address, api_key, timeout_s};
  std::unique_ptr<bench::Backend> backend =
      backend_name == "grpc" ? bench::NewGrpcBackend(options) : bench::NewOpenAiBackend(options);
  absl::StatusOr<bench::ServerInfo> info = backend->Probe();
  if (!info.ok()) {
    std::fprintf(stderr, "folio bench: cannot reach a %s server at %s: %s\n", backend_name.c_str(),
                 address.c_str(), std::string(info.status().message()).c_str());
    return 1;
  }
  bench::WorkloadOptions w;
  w.dataset = dataset;
  w.num_prompts = static_cast<int32_t>(num_prompts);
  w.input_len = static_cast<int32_t>(input_len);
  w.output_len = static_cast<int32_t>(output_len);
  w.seed = static_cast<uint64_t>(seed);
  w.max_model_len = info->max_model_len;
  w.vocab_size = vocab_size > 0 ? static_cast<int32_t>(vocab_size) : info->vocab_size;
  const bool needs_vocab = dataset == "random" || dataset == "sharegpt" || dataset == "alpaca";
  if (needs_vocab && w.vocab_size == 0) {
    return BadFlag("--vocab-size is needed: the " + backend_name + " server does not say its vocabulary size");
  }
  absl::StatusOr<std::vector<bench::BenchRequest>> requests = bench::MakeWorkload(w);
  if (!requests.ok()) return BadFlag(std::string(requests.status().message()));
  const std::vector<double> arrivals = bench::ArrivalTimes(w.num_prompts, rate, w.seed);

  int64_t threads = max_concurrency > 0 ? max_concurrency : num_prompts;
  if (max_concurrency == 0 && threads > kMaxThreads) {
    threads = kMaxThreads;
    std::fprintf(stderr, "folio bench: at most %d requests in flight (one thread each); "
                 "--max-concurrency sets another bound\n", kMaxThreads);
  }
  threads = std::min<int64_t>(threads, num_prompts);
  std::fprintf(stderr, "folio bench: %d requests to %s (%s, model %s), request rate %s, "
               "max concurrency %s\n", w.num_prompts, address.c_str(), backend_name.c_str(),
               info->model_name.c_str(), request_rate.c_str(),
               max_concurrency > 0 ? std::to_string(max_concurrency).c_str() : "unbounded");

  std::vector<bench::RequestRecord> records(requests->size());
  std::atomic<size_t> next{0};
  std::mutex progress_mu;
  size_t done = 0;
  const Clock::time_point start = Clock::now();
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < requests->size();) {
      std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(arrivals[i])));
      const double send_time = std::chrono::duration<double>(Clock::now() - start).count();
      records[i] = backend->Send((*requests)[i], info->model_name);
      records[i].send_time = send_time;
      std::lock_guard<std::mutex> lock(progress_mu);
      ++done;
      std::fprintf(stderr, "\rfolio bench: %zu/%zu done", done, requests->size());
      std::fflush(stderr);
    }
  };
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  const double duration = std::chrono::duration<double>(Clock::now() - start).count();
  std::fputs("\n", stderr);

  const bench::Summary summary = bench::Summarize(records, duration, slo);
  std::fputs(bench::FormatReport(summary).c_str(), stdout);
  int failures_shown = 0;
  for (const bench::RequestRecord& r : records) {
    if (!r.success && failures_shown++ < 5) std::fprintf(stderr, "folio bench: failed: %s\n", r.error.c_str());
  }
  if (!json_path.empty()) {
    nlohmann::json j = bench::ToJson(summary);
    j["backend"] = backend_name;
    j["address"] = address;
    j["model"] = info->model_name;
    j["dataset"] = dataset;
    j["num_prompts"] = num_prompts;
    j["request_rate"] = std::isfinite(rate) ? nlohmann::json(rate) : nlohmann::json("inf");
    j["max_concurrency"] = max_concurrency;
    j["requests"] = nlohmann::json::array();
    for (const bench::RequestRecord& r : records) j["requests"].push_back(bench::ToJson(r));
    std::ofstream out(json_path);
    out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!out) {
      std::fprintf(stderr, "folio bench: --json: cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return summary.failed == 0 ? 0 : 1;
}

}  // namespace folio
