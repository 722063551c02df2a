#ifndef FOLIO_CLIENT_OFFLINE_ENGINE_H_
#define FOLIO_CLIENT_OFFLINE_ENGINE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/sampling_params.h"
#include "common/tokenizer.h"
#include "scheduler/scheduler.h"
#include "worker/cpu_worker.h"

namespace folio {

// `folio run`: the scheduler and one CPU worker in one process, no network —
// vLLM's offline LLM.generate. The same plans a cluster would send over
// gRPC go straight to the worker.
class OfflineEngine {
 public:
  struct Options {
    std::string model_dir;
    int32_t block_size = 16;
    int64_t kv_cache_bytes = int64_t{256} << 20;
    int32_t num_device_blocks = 0;  // > 0 overrides kv_cache_bytes
    int32_t num_host_blocks = 0;
    int32_t max_num_batched_tokens = 2048;
    int32_t max_num_seqs = 256;
    // 0 = the model's context (ModelConfig::MaxModelLen), capped at the KV cache's
    // token slots; > 0 must fit in them (ResolveMaxModelLen).
    int32_t max_model_len = 0;
    bool enable_prefix_caching = true;
    bool host_prefix_cache = false;  // SchedulerConfig::host_prefix_cache
    PreemptionMode preemption_mode = PreemptionMode::kAuto;
    uint64_t seed = 0;
    int32_t num_threads = 0;  // compute threads (CpuWorker::Options); 0 = all cores
    std::optional<DType> dtype;  // stored weight type (CpuWorker::Options); nullopt = auto
    std::string quantization;    // "" or "int8" (CpuWorker::Options)
    // What the KV cache stores (CpuWorker::Options, ParseCpuKvCacheDtype).
    kernels::CacheDtype kv_cache_dtype = kernels::CacheDtype::kFloat32;
    bool check_invariants = false;
  };

  struct Request {
    std::string prompt;                            // tokenized as Tokenizer::EncodePrompt does
    std::optional<std::vector<TokenId>> prompt_token_ids;  // used as is when set
    SamplingParams sampling;
    // Keep only the prompt's last k tokens (-1: max_model_len - 1); unset = all.
    std::optional<int32_t> truncate_prompt_tokens;
    // vLLM's bad_words, tokenized into sampling.bad_words_token_ids here.
    std::vector<std::string> bad_words;
  };

  struct Sequence {
    int32_t index = 0;
    std::string text;
    std::vector<TokenId> token_ids;
    std::vector<float> logprobs;
    // With sampling.logprobs = N > 0 and streamed outputs (n == best_of, no
    // beam search): per output token, the N most likely tokens of the raw
    // model distribution, best first. Empty otherwise.
    std::vector<std::vector<TokenLogprob>> top_logprobs;
    FinishReason finish_reason = FinishReason::kNone;
    double cumulative_logprob = 0.0;
  };

  struct Result {
    std::vector<TokenId> prompt_token_ids;
    std::vector<Sequence> sequences;  // n of them, by index
    int32_t num_cached_prompt_tokens = 0;
    std::string error;  // set when the request could not be served
    // With sampling.prompt_logprobs: prompt tokens 1..P-1, each with its
    // log-prob given those before it and the most likely tokens there.
    std::optional<std::vector<SampledToken>> prompt_logprobs;
  };

  static absl::StatusOr<std::unique_ptr<OfflineEngine>> Create(const Options& options);

  // Runs every request to completion, batched together; results in request
  // order. INVALID_ARGUMENT (naming the request and field) for bad input.
  absl::StatusOr<std::vector<Result>> Generate(const std::vector<Request>& requests);

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const Scheduler& scheduler() const { return *scheduler_; }
  const ModelConfig& model_config() const { return worker_->config(); }
  // Times every step by part from now on (worker/step_profile.h); `profile`
  // must outlive the engine's Generate calls.
  void set_step_profile(StepProfile* profile) { worker_->set_step_profile(profile); }
  // Why max_model_len was capped below the model's, for the user; empty
  // when it was not.
  const std::string& max_model_len_note() const { return max_model_len_note_; }

 private:
  OfflineEngine(std::unique_ptr<Tokenizer> tokenizer, std::unique_ptr<CpuWorker> worker,
                std::unique_ptr<Scheduler> scheduler);

  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<CpuWorker> worker_;
  std::unique_ptr<Scheduler> scheduler_;
  RequestId next_id_ = 0;
  std::string max_model_len_note_;
};

}  // namespace folio

#endif  // FOLIO_CLIENT_OFFLINE_ENGINE_H_
