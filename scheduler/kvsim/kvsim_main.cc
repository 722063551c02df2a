// folio-kvsim: the PagedAttention paper's memory measurements, made by the
// real scheduler and block manager with the model replaced by a step counter.
// Keys of the --json output are documented in docs/kvsim.md.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "kernels/cache_layout.h"
#include "nlohmann/json.hpp"
#include "scheduler/kvsim/memory_accounting.h"
#include "scheduler/kvsim/multiturn.h"
#include "scheduler/kvsim/simulation.h"

namespace folio::kvsim {
namespace {

constexpr char kUsage[] = R"(usage: folio-kvsim [options]
  --trace sharegpt|alpaca|FILE.jsonl|multiturn
                                       workload (default sharegpt); a file has one
                                       {"prompt_len": P, "output_len": O} per line;
                                       multiturn: chat conversations re-sending their
                                       history, prefix cache device-only vs with the
                                       host tier (docs/kvsim.md)
  --num-requests N                     synthetic trace size (default 1000)
  --seed S                             trace and token seed (default 0)
  --token-slots N[,N...]               KV pool in token slots (default 15700, in
                                       float16); several only with multiturn, each one
                                       simulated
  --kv-cache-mb N[,N...]               KV pool in MiB instead, sized for the model
                                       below and --kv-cache-dtype
  --kv-cache-dtype auto|float32|float16|bfloat16|int8|fp8
                                       what the cache stores (default auto = float16);
                                       int8 and fp8 keep one-byte codes plus a float32
                                       scale per block and KV head. With --token-slots,
                                       the memory those float16 slots take
  --num-layers N (40)  --num-kv-heads N (40)  --head-dim N (128)
                                       the model whose KV the bytes hold (OPT-13B)
  --block-size N                       8, 16 or 32 (default 16)
  --max-model-len N                    default 2048
  --max-num-seqs N                     default 256
  --max-num-batched-tokens N           default 2048
  --policies LIST                      of none,max,pow2,oracle (default all)
  --sharing                            also measure blocks saved by parallel
                                       sampling (n=2,4,6) and beam search (2,4,6)
  --no-verify                          skip the simulated worker's KV checks
  --json                               one JSON object instead of a table
multiturn only:
  --conversations N (200)  --concurrency N (16, in flight at once)
  --system-prompt-len N (200)  --mean-turns X (4)  --mean-user-len X (64)
  --mean-reply-len X (160)
  --host-token-slots N                 host pool (default 4x the largest device pool)
  --host-tier-blocks-per-step N        the tier's step budget (-1: the token
                                       budget's, default; 0: no bound)

Exit status: 0; 1 when a policy could not serve every request (its figures
then cover fewer requests; stderr names the policy and the first error);
2 for bad flags or a bad trace.
)";

struct Flags {
  std::string trace = "sharegpt";
  int32_t num_requests = 1000;
  SimulationOptions sim;
  std::vector<int64_t> token_slots = {15700};
  bool token_slots_given = false;
  std::vector<int64_t> kv_cache_mb;  // replaces token_slots when given
  KvModelShape kv_shape;
  kernels::CacheDtype kv_cache_dtype = kernels::CacheDtype::kFloat16;
  MultiTurnWorkload multiturn;
  int64_t host_token_slots = 0;  // 0: 4x the largest device pool
  int32_t host_tier_blocks_per_step = -1;
  std::vector<ReservationPolicy> policies = {ReservationPolicy::kNone, ReservationPolicy::kMax,
                                             ReservationPolicy::kPow2, ReservationPolicy::kOracle};
  bool sharing = false;
  bool json = false;
};

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "folio-kvsim: %s\n", message.c_str());
  std::exit(2);
}

double ParsePositive(const std::string& flag, const char* value) {
  double v = 0;
  if (value == nullptr || !absl::SimpleAtod(value, &v) || !(v > 0)) {
    Fail(flag + " needs a positive number");
  }
  return v;
}

template <typename T>
T ParseNumber(const std::string& flag, const char* value, int64_t min = 1) {
  int64_t v = 0;
  if (value == nullptr || !absl::SimpleAtoi(value, &v) || v < min) {
    Fail(flag + (min == 0 ? " needs a non-negative integer" : " needs a positive integer"));
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
      f.sim.seed = ParseNumber<uint64_t>(flag, value, /*min=*/0), ++i;
    } else if (flag == "--token-slots") {
      f.token_slots.clear();
      f.token_slots_given = true;
      for (const auto& part : absl::StrSplit(take(), ',')) {
        const std::string n(part);
        f.token_slots.push_back(ParseNumber<int64_t>(flag, n.c_str()));
      }
    } else if (flag == "--kv-cache-mb") {
      f.kv_cache_mb.clear();
      for (const auto& part : absl::StrSplit(take(), ',')) {
        const std::string n(part);
        f.kv_cache_mb.push_back(ParseNumber<int64_t>(flag, n.c_str()));
      }
    } else if (flag == "--kv-cache-dtype") {
      absl::StatusOr<kernels::CacheDtype> d = ParseKvsimCacheDtype(take());
      if (!d.ok()) Fail(std::string(d.status().message()));
      f.kv_cache_dtype = *d;
    } else if (flag == "--num-layers") {
      f.kv_shape.num_layers = ParseNumber<int32_t>(flag, value), ++i;
    } else if (flag == "--num-kv-heads") {
      f.kv_shape.num_kv_heads = ParseNumber<int32_t>(flag, value), ++i;
    } else if (flag == "--head-dim") {
      f.kv_shape.head_dim = ParseNumber<int32_t>(flag, value), ++i;
    } else if (flag == "--conversations") {
      f.multiturn.conversations = ParseNumber<int32_t>(flag, value), ++i;
    } else if (flag == "--concurrency") {
      f.multiturn.concurrency = ParseNumber<int32_t>(flag, value), ++i;
    } else if (flag == "--system-prompt-len") {
      f.multiturn.system_prompt_len = ParseNumber<int32_t>(flag, value, /*min=*/0), ++i;
    } else if (flag == "--mean-turns") {
      f.multiturn.mean_turns = ParsePositive(flag, value), ++i;
    } else if (flag == "--mean-user-len") {
      f.multiturn.mean_user_len = ParsePositive(flag, value), ++i;
    } else if (flag == "--mean-reply-len") {
      f.multiturn.mean_reply_len = ParsePositive(flag, value), ++i;
    } else if (flag == "--host-token-slots") {
      f.host_token_slots = ParseNumber<int64_t>(flag, value), ++i;
    } else if (flag == "--host-tier-blocks-per-step") {
      int64_t v = 0;
      if (value == nullptr || !absl::SimpleAtoi(value, &v) || v < -1 || v > INT32_MAX) {
        Fail(flag + " needs an integer >= -1");
      }
      f.host_tier_blocks_per_step = static_cast<int32_t>(v), ++i;
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
  if (f.token_slots_given && !f.kv_cache_mb.empty()) {
    Fail("give the pool as --token-slots or as --kv-cache-mb, not both");
  }
  // The pool in bytes: --kv-cache-mb, or what the --token-slots take in
  // float16; then the whole blocks of --kv-cache-dtype those bytes hold.
  const int64_t fp16_block_bytes =
      KvBlockBytes(f.kv_shape, f.sim.block_size, kernels::CacheDtype::kFloat16);
  const int64_t block_bytes = KvBlockBytes(f.kv_shape, f.sim.block_size, f.kv_cache_dtype);
  if (!f.kv_cache_mb.empty()) {
    f.token_slots.clear();
    for (int64_t mb : f.kv_cache_mb) {
      const int64_t slots = TokenSlotsInBytes(mb << 20, f.kv_shape, f.sim.block_size,
                                              f.kv_cache_dtype);
      if (slots == 0) {
        Fail(absl::StrCat("--kv-cache-mb ", mb, " holds no KV block of ", block_bytes,
                          " bytes (", kernels::CacheDtypeName(f.kv_cache_dtype), ")"));
      }
      f.token_slots.push_back(slots);
    }
  } else if (block_bytes != fp16_block_bytes) {
    for (int64_t& slots : f.token_slots) {
      slots = TokenSlotsInBytes(slots * (fp16_block_bytes / f.sim.block_size), f.kv_shape,
                                f.sim.block_size, f.kv_cache_dtype);
    }
  }
  if (f.token_slots.size() > 1 && f.trace != "multiturn") {
    Fail(f.kv_cache_mb.empty() ? "several --token-slots need --trace multiturn"
                               : "several --kv-cache-mb need --trace multiturn");
  }
  for (int64_t slots : f.token_slots) {
    if (f.sim.max_model_len > slots) {
      Fail(absl::StrCat("--max-model-len ", f.sim.max_model_len, " exceeds ",
                        f.kv_cache_mb.empty() && block_bytes == fp16_block_bytes
                            ? "--token-slots "
                            : "the pool's token slots, ",
                        slots, ": a request that long could never be admitted"));
    }
  }
  f.sim.token_slots = f.token_slots.front();
  return f;
}

// A share of the memory, or null when no memory was ever in use (every
// request a single token, say): there is nothing to share out.
nlohmann::json ShareOrNull(const MemoryBreakdown& m, double part) {
  return m.total() > 0 ? nlohmann::json(m.Share(part)) : nlohmann::json(nullptr);
}

std::string Percent(const nlohmann::json& share) {
  return share.is_null() ? "n/a" : absl::StrFormat("%.1f%%", 100 * share.get<double>());
}

// What the pool's memory is: the cache's element type and the bytes it
// takes per block and per token (kvsim counts slots; this turns them into
// memory for the model shape given).
nlohmann::json KvJson(const Flags& f) {
  const int64_t block_bytes = KvBlockBytes(f.kv_shape, f.sim.block_size, f.kv_cache_dtype);
  return {{"kv_cache_dtype", kernels::CacheDtypeName(f.kv_cache_dtype)},
          {"kv_block_bytes", block_bytes},
          {"kv_bytes_per_token", static_cast<double>(block_bytes) / f.sim.block_size},
          {"num_layers", f.kv_shape.num_layers},
          {"num_kv_heads", f.kv_shape.num_kv_heads},
          {"head_dim", f.kv_shape.head_dim}};
}

// MiB of KV memory `slots` token slots take.
double KvCacheMb(const Flags& f, int64_t slots) {
  const int64_t block_bytes = KvBlockBytes(f.kv_shape, f.sim.block_size, f.kv_cache_dtype);
  return static_cast<double>(slots) / f.sim.block_size * static_cast<double>(block_bytes) /
         (1 << 20);
}

nlohmann::json PolicyJson(const SimulationResult& r) {
  const MemoryBreakdown& m = r.memory;
  return {
      {"token_states_share", ShareOrNull(m, m.token_states)},
      {"reserved_share", ShareOrNull(m, m.reserved)},
      {"internal_fragmentation_share", ShareOrNull(m, m.internal)},
      {"external_fragmentation_share", ShareOrNull(m, m.external)},
      {"waste_share", m.total() > 0 ? nlohmann::json(1.0 - m.Share(m.token_states))
                                    : nlohmann::json(nullptr)},
      {"mean_batch_requests", r.mean_batch_requests},
      {"mean_batch_sequences", r.mean_batch_sequences},
      {"mean_batch_requests_all_steps", r.mean_batch_requests_all_steps},
      {"saturated_steps", r.saturated_steps},
      {"preemptions", r.preemptions_recompute + r.preemptions_swap},
      {"preemptions_recompute", r.preemptions_recompute},
      {"preemptions_swap", r.preemptions_swap},
      {"steps", r.steps},
      {"generated_tokens", r.generated_tokens},
      {"failed_requests", r.failed_requests},
  };
}

SimulationResult RunOrDie(const Trace& trace, const SimulationOptions& sim,
                          ReservationPolicy policy, const SamplingParams& fanout) {
  absl::StatusOr<SimulationResult> r = Simulate(trace, sim, policy, fanout);
  if (!r.ok()) Fail(std::string(r.status().message()));
  return *r;
}

// --trace multiturn: each device pool size without and with the host tier.
int MainMultiTurn(const Flags& flags) {
  const int64_t host_slots =
      flags.host_token_slots > 0
          ? flags.host_token_slots
          : 4 * *std::max_element(flags.token_slots.begin(), flags.token_slots.end());
  const MultiTurnWorkload& w = flags.multiturn;
  nlohmann::json out;
  out["trace"] = {{"name", "multiturn"},
                  {"conversations", w.conversations},
                  {"concurrency", w.concurrency},
                  {"system_prompt_len", w.system_prompt_len},
                  {"mean_turns", w.mean_turns},
                  {"max_turns", w.max_turns},
                  {"mean_user_len", w.mean_user_len},
                  {"mean_reply_len", w.mean_reply_len},
                  {"seed", flags.sim.seed}};
  out["pool"] = {{"host_token_slots", host_slots},
                 {"block_size", flags.sim.block_size},
                 {"max_model_len", flags.sim.max_model_len},
                 {"max_num_seqs", flags.sim.max_num_seqs},
                 {"max_num_batched_tokens", flags.sim.max_num_batched_tokens},
                 {"host_tier_blocks_per_step", flags.host_tier_blocks_per_step}};
  out["pool"].update(KvJson(flags));
  out["runs"] = nlohmann::json::array();
  int64_t failed = 0;
  for (int64_t slots : flags.token_slots) {
    for (bool tier : {false, true}) {
      SimulationOptions sim = flags.sim;
      sim.token_slots = slots;
      absl::StatusOr<MultiTurnResult> r =
          SimulateMultiTurn(w, sim, host_slots, tier, flags.host_tier_blocks_per_step);
      if (!r.ok()) Fail(std::string(r.status().message()));
      failed += r->failed_requests;
      out["runs"].push_back({{"token_slots", slots},
                             {"kv_cache_mb", KvCacheMb(flags, slots)},
                             {"host_tier", tier},
                             {"requests", r->requests},
                             {"prompt_tokens", r->prompt_tokens},
                             {"hit_tokens", r->hit_tokens},
                             {"hit_rate", r->hit_rate()},
                             {"host_hit_tokens", r->host_hit_tokens},
                             {"computed_prompt_tokens", r->computed_prompt_tokens},
                             {"blocks_to_host", r->blocks_to_host},
                             {"blocks_from_host", r->blocks_from_host},
                             {"blocks_over_budget", r->blocks_over_budget},
                             {"preemptions", r->preemptions},
                             {"steps", r->steps},
                             {"failed_requests", r->failed_requests}});
    }
  }
  if (failed > 0) {
    std::fprintf(stderr, "folio-kvsim: %lld requests failed\n", static_cast<long long>(failed));
  }
  if (flags.json) {
    std::printf("%s\n", out.dump(2).c_str());
    return failed > 0 ? 1 : 0;
  }
  const nlohmann::json& first = out["runs"][0];
  std::printf("trace multiturn: %d conversations, %d at a time, %lld turns (mean prompt %.0f "
              "tokens); system prompt %d, user mean %.0f, reply mean %.0f tokens\n",
              w.conversations, w.concurrency, first["requests"].get<long long>(),
              first["prompt_tokens"].get<double>() / first["requests"].get<double>(),
              w.system_prompt_len, w.mean_user_len, w.mean_reply_len);
  std::printf("host pool: %lld token slots, block size %d; KV in %s, %.0f bytes per token\n\n",
              static_cast<long long>(host_slots), flags.sim.block_size,
              out["pool"]["kv_cache_dtype"].get<std::string>().c_str(),
              out["pool"]["kv_bytes_per_token"].get<double>());
  std::printf("%12s %9s %9s %11s %17s %11s %8s\n", "device slots", "host tier", "hit rate",
              "host hits", "computed prompt", "preempted", "steps");
  for (const nlohmann::json& r : out["runs"]) {
    std::printf("%12lld %9s %8.1f%% %11lld %17lld %11lld %8lld\n", r["token_slots"].get<long long>(),
                r["host_tier"].get<bool>() ? "on" : "off", 100 * r["hit_rate"].get<double>(),
                r["host_hit_tokens"].get<long long>(), r["computed_prompt_tokens"].get<long long>(),
                r["preemptions"].get<long long>(), r["steps"].get<long long>());
  }
  return failed > 0 ? 1 : 0;
}

int Main(int argc, char** argv) {
  Flags flags = ParseFlags(argc, argv);
  if (flags.trace == "multiturn") return MainMultiTurn(flags);
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
                 {"max_num_batched_tokens", flags.sim.max_num_batched_tokens},
                 {"kv_cache_mb", KvCacheMb(flags, flags.sim.token_slots)}};
  out["pool"].update(KvJson(flags));
  out["policies"] = nlohmann::json::object();
  std::map<ReservationPolicy, std::string> failures;  // first error per policy
  for (ReservationPolicy policy : flags.policies) {
    const SimulationResult r = RunOrDie(*trace, flags.sim, policy, SamplingParams{});
    out["policies"][ReservationPolicyName(policy)] = PolicyJson(r);
    failures[policy] = r.first_error;
  }
  if (out["policies"].contains("none") && out["policies"].contains("max")) {
    const nlohmann::json& none = out["policies"]["none"];
    const nlohmann::json& max = out["policies"]["max"];
    // Batches are averaged over saturated steps: without any on either side
    // memory never limited the batch, and there is nothing to compare.
    const bool comparable = none["saturated_steps"].get<int64_t>() > 0 &&
                            max["saturated_steps"].get<int64_t>() > 0;
    out["batch_ratio_none_vs_max"] =
        comparable ? nlohmann::json(none["mean_batch_requests"].get<double>() /
                                    max["mean_batch_requests"].get<double>())
                   : nlohmann::json(nullptr);
  }
  // Requests a policy could never serve make its figures cover fewer
  // requests than the others': said on stderr, and the exit status is 1.
  int64_t failed = 0;
  for (ReservationPolicy policy : flags.policies) {
    const nlohmann::json& p = out["policies"][ReservationPolicyName(policy)];
    if (p["failed_requests"].get<int64_t>() == 0) continue;
    failed += p["failed_requests"].get<int64_t>();
    std::fprintf(stderr, "folio-kvsim: policy %s: %lld of %zu requests failed (first: %s)\n",
                 ReservationPolicyName(policy),
                 static_cast<long long>(p["failed_requests"].get<int64_t>()),
                 trace->requests.size(), failures[policy].c_str());
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
    return failed > 0 ? 1 : 0;
  }
  std::printf("trace %s: %zu requests, mean prompt %.1f, mean output %.1f tokens\n",
              trace->name.c_str(), trace->requests.size(), trace->MeanPromptLen(),
              trace->MeanOutputLen());
  std::printf("pool: %lld token slots (%.1f MiB of %s KV, %.0f bytes per token), block size "
              "%d, max_model_len %d\n\n",
              static_cast<long long>(flags.sim.token_slots), out["pool"]["kv_cache_mb"].get<double>(),
              out["pool"]["kv_cache_dtype"].get<std::string>().c_str(),
              out["pool"]["kv_bytes_per_token"].get<double>(), flags.sim.block_size,
              flags.sim.max_model_len);
  std::printf("%-8s %8s %9s %9s %9s %11s %11s %8s\n", "policy", "tokens", "reserved", "internal",
              "external", "batch(req)", "preempted", "steps");
  for (auto& [name, p] : out["policies"].items()) {
    std::printf("%-8s %8s %9s %9s %9s %11.2f %11lld %8lld\n", name.c_str(),
                Percent(p["token_states_share"]).c_str(), Percent(p["reserved_share"]).c_str(),
                Percent(p["internal_fragmentation_share"]).c_str(),
                Percent(p["external_fragmentation_share"]).c_str(),
                p["mean_batch_requests"].get<double>(), p["preemptions"].get<long long>(),
                p["steps"].get<long long>());
  }
  if (out.contains("batch_ratio_none_vs_max")) {
    const nlohmann::json& ratio = out["batch_ratio_none_vs_max"];
    std::printf("\nmean batch, paged vs max reservation: %s\n",
                ratio.is_null() ? "n/a (memory never held requests back under one of them)"
                                : absl::StrFormat("%.2fx", ratio.get<double>()).c_str());
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
  return failed > 0 ? 1 : 0;
}

}  // namespace
}  // namespace folio::kvsim

int main(int argc, char** argv) { return folio::kvsim::Main(argc, argv); }
