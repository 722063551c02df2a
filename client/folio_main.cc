// folio: the command-line tool. `folio run` is the offline engine (scheduler
// + one CPU worker in this process). Serving commands (serve, generate,
// bench) come with the cluster.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "client/commands.h"
#include "client/logit_bias_flag.h"
#include "client/offline_engine.h"
#include "common/generation_defaults.h"
#include "common/incremental_detokenizer.h"
#include "common/json_text.h"
#include "common/kv_cache_dtype.h"
#include "common/openmp_env.h"
#include "nlohmann/json.hpp"

namespace folio {
namespace {

constexpr char kRunUsage[] = R"(usage: folio run --model DIR (--prompt TEXT | --prompts-file FILE.jsonl) [options]

Sampling:
  --max-tokens N      (16)       --temperature T (1.0; 0 = greedy)
  --top-p P (1.0)  --top-k K (0 = off)  --min-p P (0)
  --repetition-penalty R (1.0)  --presence-penalty P (0)  --frequency-penalty F (0)
  --seed S            per-request seed (deterministic sampling)
  --n N  --best-of N  --beam-width K  --length-penalty L
  --ignore-eos        --stop-token-id ID (repeatable)
  --min-tokens N      no EOS or stop token before N tokens (0)
  --logit-bias ID=B   add B in [-100, 100] to token ID's logit (repeatable)
  --allowed-token-id ID  sample only among these tokens (repeatable)
  --bad-word WORD     never generate WORD (repeatable; as vLLM's bad_words)
  --logprobs N        with --json: the N most likely tokens at each position
                      (raw model log-probs, as vLLM reports them)
  --prompt-logprobs N each prompt token's log-prob given those
                      before it, and (in --json) the N most likely tokens
                      there; without --json on stderr. No prefix-cache reuse
                      for such requests
  --truncate-prompt-tokens K  keep only the prompt's last K tokens (-1: as many
                      as max-model-len leaves room for)
  --generation-config auto|none|DIR
                      defaults of the sampling flags not given: auto (default) =
                      the model's generation_config.json recommendations
                      (temperature, top_p, top_k, min_p, repetition_penalty,
                      max_new_tokens), none = the values above
Engine:
  --block-size N (16)  --kv-cache-mb N (256)  --num-device-blocks N  --num-host-blocks N (0)
  --max-num-batched-tokens N (2048)  --max-num-seqs N (256)
  --preemption-mode auto|recompute|swap   --no-prefix-caching
  --[no-]host-prefix-cache  evicted cached prompt blocks go to the host blocks and
                      come back by swap (default: on when there are host blocks)
  --threads N         compute threads (0 = all cores; kernels and GEMMs share them)
  --dtype auto|float32|bfloat16  how weights are stored (auto: the checkpoint's;
                      compute is float32 either way, the KV cache too by default)
  --quantization int8 weight-only int8, per output channel, computed at load
  --kv-cache-dtype auto|int8|fp8  what the KV cache stores: auto = float32; int8 and
                      fp8 (fp8_e4m3) keep one-byte codes with a float32 scale per
                      block and KV head: about 4x the tokens in the same --kv-cache-mb
  --max-model-len N   prompt + output tokens (default: the model's, capped at the
                      KV cache's token slots; larger than those is an error)
Output:
  --json              one JSON object per request (ids, log-probs, finish reasons)
  --timing            on stderr: load time, tokens, ms per output token, tokens/s, and
                      the worker's step time by part (GEMMs, attention, norms, ...)

Exit status: 0 when every request was served, 1 when some failed (each is
still printed, with its error), 2 for bad flags or a model that cannot load.

A prompts file holds one JSON object per line: {"prompt": "..."} or
{"prompt_token_ids": [...]}, optionally with "max_tokens", "min_tokens",
"temperature", "top_p", "top_k", "seed", "n", "logprobs", "prompt_logprobs",
"truncate_prompt_tokens".
)";

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "folio run: %s\n", message.c_str());
  std::exit(2);
}

template <typename T>
T Number(const std::string& flag, const std::string& value) {
  if constexpr (std::is_floating_point_v<T>) {
    double v;
    if (!absl::SimpleAtod(value, &v)) Fail(flag + " needs a number, got '" + value + "'");
    return static_cast<T>(v);
  } else {
    int64_t v;
    if (!absl::SimpleAtoi(value, &v)) Fail(flag + " needs an integer, got '" + value + "'");
    return static_cast<T>(v);
  }
}

struct Flags {
  OfflineEngine::Options engine;
  SamplingParams sampling;
  std::optional<std::string> prompt;
  std::string prompts_file;
  bool json = false;
  bool timing = false;
  std::string generation_config = "auto";
  std::optional<int32_t> truncate_prompt_tokens;
  std::vector<std::string> bad_words;
  std::vector<std::string> given;  // the flags on the command line
  bool Given(const char* flag) const {
    return std::find(given.begin(), given.end(), flag) != given.end();
  }
};

// The sampling defaults of --generation-config for the fields no flag set
// (the model's recommendations, like folio-scheduler's for unset fields).
void ApplySamplingDefaults(Flags& f) {
  std::string source;
  absl::StatusOr<SamplingDefaults> d =
      LoadSamplingDefaults(f.generation_config, f.engine.model_dir, &source);
  if (!d.ok()) Fail(std::string(d.status().message()) + " (--generation-config none ignores it)");
  if (f.Given("--temperature")) d->temperature.reset();
  if (f.Given("--top-p")) d->top_p.reset();
  if (f.Given("--top-k")) d->top_k.reset();
  if (f.Given("--min-p")) d->min_p.reset();
  if (f.Given("--repetition-penalty")) d->repetition_penalty.reset();
  if (f.Given("--max-tokens")) d->max_tokens.reset();
  if (d->empty()) return;
  d->ApplyTo(&f.sampling);
  std::fprintf(stderr, "folio run: sampling with %s from %s (--generation-config none turns this off)\n",
               d->ToString().c_str(), source.c_str());
}

Flags Parse(int argc, char** argv) {
  Flags f;
  f.sampling.max_tokens = 16;
  bool best_of_set = false;
  for (int i = 0; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Fail(flag + " needs a value");
      return argv[++i];
    };
    SamplingParams& s = f.sampling;
    OfflineEngine::Options& e = f.engine;
    f.given.push_back(flag);
    if (flag == "--help" || flag == "-h") { std::fputs(kRunUsage, stdout); std::exit(0); }
    else if (flag == "--model") e.model_dir = value();
    else if (flag == "--prompt") f.prompt = value();
    else if (flag == "--prompts-file") f.prompts_file = value();
    else if (flag == "--json") f.json = true;
    else if (flag == "--timing") f.timing = true;
    else if (flag == "--generation-config") f.generation_config = value();
    else if (flag == "--max-tokens") s.max_tokens = Number<int32_t>(flag, value());
    else if (flag == "--temperature") s.temperature = Number<float>(flag, value());
    else if (flag == "--top-p") s.top_p = Number<float>(flag, value());
    else if (flag == "--top-k") s.top_k = Number<int32_t>(flag, value());
    else if (flag == "--min-p") s.min_p = Number<float>(flag, value());
    else if (flag == "--repetition-penalty") s.repetition_penalty = Number<float>(flag, value());
    else if (flag == "--presence-penalty") s.presence_penalty = Number<float>(flag, value());
    else if (flag == "--frequency-penalty") s.frequency_penalty = Number<float>(flag, value());
    else if (flag == "--seed") s.seed = Number<uint64_t>(flag, value());
    else if (flag == "--n") s.n = Number<int32_t>(flag, value());
    else if (flag == "--best-of") { s.best_of = Number<int32_t>(flag, value()); best_of_set = true; }
    else if (flag == "--beam-width") s.beam_width = Number<int32_t>(flag, value());
    else if (flag == "--length-penalty") s.length_penalty = Number<float>(flag, value());
    else if (flag == "--ignore-eos") s.ignore_eos = true;
    else if (flag == "--logprobs") s.logprobs = Number<int32_t>(flag, value());
    else if (flag == "--prompt-logprobs") s.prompt_logprobs = Number<int32_t>(flag, value());
    else if (flag == "--truncate-prompt-tokens") {
      f.truncate_prompt_tokens = Number<int32_t>(flag, value());
    }
    else if (flag == "--stop-token-id") s.stop_token_ids.push_back(Number<TokenId>(flag, value()));
    else if (flag == "--min-tokens") s.min_tokens = Number<int32_t>(flag, value());
    else if (flag == "--logit-bias") {
      const std::string v = value();
      const std::optional<TokenBias> bias = ParseLogitBiasFlag(v);
      if (!bias.has_value()) Fail("--logit-bias needs ID=BIAS, got '" + v + "'");
      s.logit_bias.push_back(*bias);
    }
    else if (flag == "--allowed-token-id") {
      s.allowed_token_ids.push_back(Number<TokenId>(flag, value()));
    }
    else if (flag == "--bad-word") f.bad_words.push_back(value());
    else if (flag == "--block-size") e.block_size = Number<int32_t>(flag, value());
    else if (flag == "--kv-cache-mb") e.kv_cache_bytes = Number<int64_t>(flag, value()) << 20;
    else if (flag == "--num-device-blocks") e.num_device_blocks = Number<int32_t>(flag, value());
    else if (flag == "--num-host-blocks") e.num_host_blocks = Number<int32_t>(flag, value());
    else if (flag == "--max-num-batched-tokens") e.max_num_batched_tokens = Number<int32_t>(flag, value());
    else if (flag == "--max-num-seqs") e.max_num_seqs = Number<int32_t>(flag, value());
    else if (flag == "--max-model-len") e.max_model_len = Number<int32_t>(flag, value());
    else if (flag == "--no-prefix-caching") e.enable_prefix_caching = false;
    else if (flag == "--host-prefix-cache") e.host_prefix_cache = true;
    else if (flag == "--no-host-prefix-cache") e.host_prefix_cache = false;
    else if (flag == "--threads") e.num_threads = Number<int32_t>(flag, value());
    else if (flag == "--dtype") {
      absl::StatusOr<std::optional<DType>> d = ParseCpuDtype(value());
      if (!d.ok()) Fail(std::string(d.status().message()));
      e.dtype = *d;
    } else if (flag == "--quantization") {
      e.quantization = value();
      if (absl::Status s = CheckCpuQuantization(e.quantization); !s.ok()) Fail(std::string(s.message()));
    } else if (flag == "--kv-cache-dtype") {
      absl::StatusOr<kernels::CacheDtype> d = ParseCpuKvCacheDtype(value());
      if (!d.ok()) Fail(std::string(d.status().message()));
      e.kv_cache_dtype = *d;
    }
    else if (flag == "--preemption-mode") {
      absl::StatusOr<PreemptionMode> m = ParsePreemptionMode(value());
      if (!m.ok()) Fail(std::string(m.status().message()));
      e.preemption_mode = *m;
    } else Fail("unknown flag " + flag + " (see folio run --help)");
  }
  if (!best_of_set && f.sampling.beam_width == 1) f.sampling.best_of = f.sampling.n;
  SortLogitBias(&f.sampling.logit_bias);
  if (f.engine.model_dir.empty()) Fail("--model is required");
  if (f.prompt.has_value() == !f.prompts_file.empty()) {
    Fail("give exactly one of --prompt and --prompts-file");
  }
  if (f.prompt.has_value() && f.prompt->empty()) Fail("--prompt is empty");
  ApplySamplingDefaults(f);
  // The host tier is on wherever it can be, unless a flag says otherwise.
  if (!f.Given("--host-prefix-cache") && !f.Given("--no-host-prefix-cache")) {
    f.engine.host_prefix_cache = f.engine.num_host_blocks > 0 && f.engine.enable_prefix_caching;
  }
  return f;
}

std::vector<OfflineEngine::Request> ReadPrompts(const Flags& f) {
  std::vector<OfflineEngine::Request> out;
  if (f.prompt.has_value()) {
    out.push_back({*f.prompt, std::nullopt, f.sampling, f.truncate_prompt_tokens, f.bad_words});
    return out;
  }
  std::ifstream in(f.prompts_file);
  if (!in) Fail("cannot open " + f.prompts_file);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = f.prompts_file + ":" + std::to_string(n) + ": ";
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) Fail(where + "not a JSON object");
    OfflineEngine::Request r{"", std::nullopt, f.sampling, f.truncate_prompt_tokens,
                             f.bad_words};
    if (j.contains("prompt") && j["prompt"].is_string()) {
      r.prompt = j["prompt"].get<std::string>();
    } else if (j.contains("prompt_token_ids") && j["prompt_token_ids"].is_array()) {
      std::vector<TokenId> ids;
      for (const auto& v : j["prompt_token_ids"]) {
        if (!v.is_number_integer()) Fail(where + "prompt_token_ids must hold integers");
        ids.push_back(v.get<TokenId>());
      }
      r.prompt_token_ids = std::move(ids);
    } else {
      Fail(where + "needs \"prompt\" (a string) or \"prompt_token_ids\" (integers)");
    }
    auto num = [&](const char* key, auto& field) {
      if (!j.contains(key)) return;
      if (!j[key].is_number()) Fail(where + key + " must be a number");
      field = j[key].get<std::remove_reference_t<decltype(field)>>();
    };
    num("max_tokens", r.sampling.max_tokens);
    num("temperature", r.sampling.temperature);
    num("top_p", r.sampling.top_p);
    num("top_k", r.sampling.top_k);
    num("logprobs", r.sampling.logprobs);
    num("min_tokens", r.sampling.min_tokens);
    if (j.contains("truncate_prompt_tokens")) {
      int32_t k = 0;
      num("truncate_prompt_tokens", k);
      r.truncate_prompt_tokens = k;
    }
    if (j.contains("prompt_logprobs")) {
      int32_t n = 0;
      num("prompt_logprobs", n);
      r.sampling.prompt_logprobs = n;
    }
    if (j.contains("seed")) {
      if (!j["seed"].is_number_unsigned()) Fail(where + "seed must be a non-negative integer");
      r.sampling.seed = j["seed"].get<uint64_t>();
    }
    if (j.contains("n")) {
      num("n", r.sampling.n);
      r.sampling.best_of = std::max(r.sampling.best_of, r.sampling.n);
    }
    out.push_back(std::move(r));
  }
  return out;
}

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

int Run(int argc, char** argv) {
  const Flags f = Parse(argc, argv);
  const std::vector<OfflineEngine::Request> requests = ReadPrompts(f);
  const auto load_start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<OfflineEngine>> engine = OfflineEngine::Create(f.engine);
  const double load_s = SecondsSince(load_start);
  if (!engine.ok()) Fail(std::string(engine.status().message()));
  if (!(*engine)->max_model_len_note().empty()) {
    std::fprintf(stderr, "folio run: %s\n", (*engine)->max_model_len_note().c_str());
  }
  StepProfile profile;
  if (f.timing) (*engine)->set_step_profile(&profile);
  const auto generate_start = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<OfflineEngine::Result>> results = (*engine)->Generate(requests);
  const double generate_s = SecondsSince(generate_start);
  if (!results.ok()) Fail(std::string(results.status().message()));
  if (f.timing) {
    // llama.cpp's "eval time" line, in spirit: what a run cost, per output token.
    int64_t prompt_tokens = 0, output_tokens = 0;
    for (const OfflineEngine::Result& r : *results) {
      prompt_tokens += static_cast<int64_t>(r.prompt_token_ids.size());
      for (const OfflineEngine::Sequence& s : r.sequences) output_tokens += s.token_ids.size();
    }
    std::fprintf(stderr,
                 "folio run: load %.3f s; %zu request(s), %lld prompt + %lld output tokens in "
                 "%.3f s: %.3f ms per output token, %.1f output tokens/s\n",
                 load_s, results->size(), static_cast<long long>(prompt_tokens),
                 static_cast<long long>(output_tokens), generate_s,
                 output_tokens > 0 ? 1e3 * generate_s / output_tokens : 0.0,
                 generate_s > 0 ? output_tokens / generate_s : 0.0);
    // Where the worker's step time went, by part.
    std::fprintf(stderr, "%s%s", FormatStepTimes("folio run: decode", profile.decode).c_str(),
                 FormatStepTimes("folio run: prompt", profile.other).c_str());
  }
  bool any_failed = false;
  for (size_t i = 0; i < results->size(); ++i) {
    const OfflineEngine::Result& r = (*results)[i];
    any_failed = any_failed || !r.error.empty();
    if (f.json) {
      // Tokens with their log-probs and text ([{"token_id", "logprob",
      // "text"}, ...], best first); the text is the token's as it would stream.
      auto token_text = [&](TokenId token) {
        const TokenId id[1] = {token};
        return IncrementalDetokenizer::Text((*engine)->tokenizer(), id,
                                            /*skip_special_tokens=*/false);
      };
      auto alternatives = [&](const std::vector<TokenLogprob>& tokens) {
        nlohmann::json alts = nlohmann::json::array();
        for (const TokenLogprob& t : tokens) {
          alts.push_back(
              {{"token_id", t.token_id}, {"logprob", t.logprob}, {"text", token_text(t.token_id)}});
        }
        return alts;
      };
      nlohmann::json j;
      j["prompt_token_ids"] = r.prompt_token_ids;
      if (r.prompt_logprobs.has_value()) {
        // vLLM's shape: null for the first prompt token, then one entry each.
        nlohmann::json scored = nlohmann::json::array({nullptr});
        for (const SampledToken& t : *r.prompt_logprobs) {
          scored.push_back({{"token_id", t.token_id},
                            {"logprob", t.logprob},
                            {"text", token_text(t.token_id)},
                            {"top_logprobs", alternatives(t.top_logprobs)}});
        }
        j["prompt_logprobs"] = std::move(scored);
      }
      j["num_cached_prompt_tokens"] = r.num_cached_prompt_tokens;
      if (!r.error.empty()) j["error"] = r.error;
      j["outputs"] = nlohmann::json::array();
      for (const OfflineEngine::Sequence& s : r.sequences) {
        nlohmann::json o = {{"index", s.index},
                            {"text", s.text},
                            {"token_ids", s.token_ids},
                            {"logprobs", s.logprobs},
                            {"cumulative_logprob", s.cumulative_logprob},
                            {"finish_reason", FinishReasonName(s.finish_reason)}};
        if (!s.top_logprobs.empty()) {
          // Per position: [{"token_id", "logprob", "text"}, ...], best first.
          nlohmann::json top = nlohmann::json::array();
          for (const std::vector<TokenLogprob>& position : s.top_logprobs) {
            top.push_back(alternatives(position));
          }
          o["top_logprobs"] = std::move(top);
        }
        j["outputs"].push_back(std::move(o));
      }
      std::printf("%s\n", JsonText(j).c_str());
      continue;
    }
    if (!r.error.empty()) std::printf("[request %zu failed: %s]\n", i, r.error.c_str());
    // Without --json the prompt's scores go to stderr, as folio generate does.
    if (r.prompt_logprobs.has_value()) {
      for (const SampledToken& t : *r.prompt_logprobs) {
        std::fprintf(stderr, "[prompt token %d: logprob %.6g]\n", t.token_id, t.logprob);
      }
    }
    for (const OfflineEngine::Sequence& s : r.sequences) {
      if (r.sequences.size() > 1) std::printf("--- %d (%s)\n", s.index, FinishReasonName(s.finish_reason));
      std::printf("%s\n", s.text.c_str());
    }
  }
  return any_failed ? 1 : 0;  // every result was printed; a failed one fails the run
}

}  // namespace
}  // namespace folio

int main(int argc, char** argv) {
  folio::UsePassiveOpenMpWaitByDefault(argv);
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs("usage: folio run|serve|generate|bench ... (folio COMMAND --help)\n", stderr);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  if (command == "run") return folio::Run(argc - 2, argv + 2);
  if (command == "serve") return folio::ServeMain(argc - 2, argv + 2);
  if (command == "generate") return folio::GenerateMain(argc - 2, argv + 2);
  if (command == "bench") return folio::BenchMain(argc - 2, argv + 2);
  std::fprintf(stderr, "folio: unknown command '%s' (available: run, serve, generate, bench)\n",
               command.c_str());
  return 2;
}
