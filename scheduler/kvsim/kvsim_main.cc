// folio-kvsim: the PagedAttention paper's memory measurements, made by the
// real scheduler and block manager with the model replaced by a step counter.
// Keys of the --json output are documented in docs/kvsim.md.

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "scheduler/kvsim/simulation.h"

namespace folio::kvsim {
namespace {

constexpr char kUsage[] = R"(usage: folio-kvsim [options]
  --trace sharegpt|alpaca|FILE.jsonl   workload (default sharegpt); a file has one
                                       {"prompt_len": P, "output_len": O} per line
  --num-requests N                     synthetic trace size (default 1000)
  --seed S                             trace and token seed (default 0)
  --token-slots N                      KV pool in token slots (default 15700)
  --block-size N                       8, 16 or 32 (default 16)
  --max-model-len N                    default 2048
  --max-num-seqs N                     default 256
  --max-num-batched-tokens N           default 2048
  --policies LIST                      of none,max,pow2,oracle (default all)
  --sharing                            also measure blocks saved by parallel
                                       sampling (n=2,4,6) and beam search (2,4,6)
  --no-verify                          skip the simulated worker's KV checks
  --json                               one JSON object instead of a table
)";

struct Flags {
  std::string trace = "sharegpt";
  int32_t num_requests = 1000;
  SimulationOptions sim;
  std::vector<ReservationPolicy> policies = {ReservationPolicy::kNone, ReservationPolicy::kMax,
                                             ReservationPolicy::kPow2, ReservationPolicy::kOracle};
  bool sharing = false;
  bool json = false;
};

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "folio-kvsim: %s\n", message.c_str());
  std::exit(2);
}

template <typename T>
T ParseNumber(const std::string& flag, const char* value) {
  int64_t v = 0;
  if (value == nullptr || !absl::SimpleAtoi(value, &v) || v <= 0) {
    Fail(flag + " needs a positive integer");
  }
  return static_cast<T>(v);
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    auto take = [&] {
      if (value == nullptr) Fail(flag + " needs a value");
      ++i;
      return std::string(value);
    };
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (flag == "--trace") {
      f.trace = take();
    } else if (flag == "--num-requests") {
      f.num_requests = ParseNumber<int32_t>(flag, value), ++i;
    } else if (flag == "--seed") {
      f.sim.seed = ParseNumber<uint64_t>(flag, value), ++i;
    } else if (flag == "--token-slots") {
      f.sim.token_slots = ParseNumber<int64_t>(flag, value), ++i;
    } else if (flag == "--block-size") {
      f.sim.block_size = ParseNumber<int32_t>(flag, value), ++i;
    } else if (flag == "--max-model-len") {
      f.sim.max_model_len = ParseNumber<int32_t>(flag, value), ++i;
    } else if (flag == "--max-num-seqs") {
      f.sim.max_num_seqs = ParseNumber<int32_t>(flag, value), ++i;
    } else if (flag == "--max-num-batched-tokens") {
      f.sim.max_num_batched_tokens = ParseNumber<int32_t>(flag, value), ++i;
    } else if (flag == "--policies") {
      f.policies.clear();
      for (const auto& name : absl::StrSplit(take(), ',')) {
        absl::StatusOr<ReservationPolicy> p = ParseReservationPolicy(std::string(name));
        if (!p.ok()) Fail(std::string(p.status().message()));
        f.policies.push_back(*p);
      }
    } else if (flag == "--sharing") {
      f.sharing = true;
    } else if (flag == "--no-verify") {
      f.sim.verify_kv = false;
    } else if (flag == "--json") {
      f.json = true;
    } else {
      Fail("unknown flag " + flag + "\n" + kUsage);
    }
  }
  return f;
}

nlohmann::json PolicyJson(const SimulationResult& r) {
  const MemoryBreakdown& m = r.memory;
  return {
      {"token_states_share", m.Share(m.token_states)},
      {"reserved_share", m.Share(m.reserved)},
      {"internal_fragmentation_share", m.Share(m.internal)},
      {"external_fragmentation_share", m.Share(m.external)},
      {"waste_share", 1.0 - m.Share(m.token_states)},
      {"mean_batch_requests", r.mean_batch_requests},
      {"mean_batch_sequences", r.mean_batch_sequences},
      {"mean_batch_requests_all_steps", r.mean_batch_requests_all_steps},
      {"saturated_steps", r.saturated_steps},
      {"preemptions", r.preemptions_recompute + r.preemptions_swap},
      {"preemptions_recompute", r.preemptions_recompute},
      {"preemptions_swap", r.preemptions_swap},
      {"steps", r.steps},
      {"generated_tokens", r.generated_tokens},
  };
}

SimulationResult RunOrDie(const Trace& trace, const SimulationOptions& sim,
                          ReservationPolicy policy, const SamplingParams& fanout) {
  absl::StatusOr<SimulationResult> r = Simulate(trace, sim, policy, fanout);
  if (!r.ok()) Fail(std::string(r.status().message()));
  return *r;
}

int Main(int argc, char** argv) {
  Flags flags = ParseFlags(argc, argv);
  absl::StatusOr<Trace> trace =
      flags.trace.ends_with(".jsonl")
          ? LoadTraceFile(flags.trace, flags.sim.max_model_len)
          : MakeSyntheticTrace(flags.trace, flags.num_requests, flags.sim.seed,
                               flags.sim.max_model_len);
  if (!trace.ok()) Fail(std::string(trace.status().message()));

  nlohmann::json out;
  out["trace"] = {{"name", trace->name},
                  {"num_requests", trace->requests.size()},
                  {"mean_prompt_len", trace->MeanPromptLen()},
                  {"mean_output_len", trace->MeanOutputLen()},
                  {"seed", flags.sim.seed}};
  out["pool"] = {{"token_slots", flags.sim.token_slots},
                 {"block_size", flags.sim.block_size},
                 {"max_model_len", flags.sim.max_model_len},
                 {"max_num_seqs", flags.sim.max_num_seqs},
                 {"max_num_batched_tokens", flags.sim.max_num_batched_tokens}};
  out["policies"] = nlohmann::json::object();
  for (ReservationPolicy policy : flags.policies) {
    out["policies"][ReservationPolicyName(policy)] =
        PolicyJson(RunOrDie(*trace, flags.sim, policy, SamplingParams{}));
  }
  if (out["policies"].contains("none") && out["policies"].contains("max")) {
    out["batch_ratio_none_vs_max"] =
        out["policies"]["none"]["mean_batch_requests"].get<double>() /
        out["policies"]["max"]["mean_batch_requests"].get<double>();
  }
  if (flags.sharing) {
    for (int32_t k : {2, 4, 6}) {
      SamplingParams parallel;
      parallel.n = parallel.best_of = k;
      SamplingParams beam;
      beam.beam_width = k;
      for (auto [key, params] : {std::pair{"parallel_sampling", parallel}, std::pair{"beam_search", beam}}) {
        SimulationResult r = RunOrDie(*trace, flags.sim, ReservationPolicy::kNone, params);
        out["sharing"][key][std::to_string(k)] = {
            {"saved_share", r.sharing.Saved()},
            {"mean_batch_sequences", r.mean_batch_sequences},
            {"preemptions", r.preemptions_recompute + r.preemptions_swap}};
      }
    }
  }

  if (flags.json) {
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("trace %s: %zu requests, mean prompt %.1f, mean output %.1f tokens\n",
              trace->name.c_str(), trace->requests.size(), trace->MeanPromptLen(),
              trace->MeanOutputLen());
  std::printf("pool: %lld token slots, block size %d, max_model_len %d\n\n",
              static_cast<long long>(flags.sim.token_slots), flags.sim.block_size,
              flags.sim.max_model_len);
  std::printf("%-8s %8s %9s %9s %9s %11s %11s %8s\n", "policy", "tokens", "reserved", "internal",
              "external", "batch(req)", "preempted", "steps");
  for (auto& [name, p] : out["policies"].items()) {
    std::printf("%-8s %7.1f%% %8.1f%% %8.1f%% %8.1f%% %11.2f %11lld %8lld\n", name.c_str(),
                100 * p["token_states_share"].get<double>(), 100 * p["reserved_share"].get<double>(),
                100 * p["internal_fragmentation_share"].get<double>(),
                100 * p["external_fragmentation_share"].get<double>(),
                p["mean_batch_requests"].get<double>(), p["preemptions"].get<long long>(),
                p["steps"].get<long long>());
  }
  if (out.contains("batch_ratio_none_vs_max")) {
    std::printf("\nmean batch, paged vs max reservation: %.2fx\n",
                out["batch_ratio_none_vs_max"].get<double>());
  }
  if (out.contains("sharing")) {
    std::printf("\nKV blocks saved by sharing:\n");
    for (auto& [kind, by_k] : out["sharing"].items()) {
      for (auto& [k, v] : by_k.items()) {
        std::printf("  %-17s %s: %5.1f%%\n", kind.c_str(), k.c_str(),
                    100 * v["saved_share"].get<double>());
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace folio::kvsim

int main(int argc, char** argv) { return folio::kvsim::Main(argc, argv); }
