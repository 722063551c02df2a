#include "client/offline_engine.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/bad_words.h"
#include "common/incremental_detokenizer.h"

namespace folio {

absl::StatusOr<std::unique_ptr<OfflineEngine>> OfflineEngine::Create(const Options& options) {
  if (options.host_prefix_cache && options.num_host_blocks <= 0) {
    return absl::InvalidArgumentError(
        "--host-prefix-cache needs host blocks to keep them in: set --num-host-blocks");
  }
  if (options.host_prefix_cache && !options.enable_prefix_caching) {
    return absl::InvalidArgumentError(
        "--host-prefix-cache is a tier of the prefix cache: drop --no-prefix-caching");
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::LoadFromDirectory(options.model_dir);
  if (!tokenizer.ok()) return tokenizer.status();
  CpuWorker::Options wo;
  wo.model_dir = options.model_dir;
  wo.block_size = options.block_size;
  wo.kv_cache_bytes = options.kv_cache_bytes;
  wo.num_device_blocks = options.num_device_blocks;
  wo.num_host_blocks = options.num_host_blocks;
  wo.seed = options.seed;
  wo.num_threads = options.num_threads;
  wo.dtype = options.dtype;
  wo.quantization = options.quantization;
  wo.kv_cache_dtype = options.kv_cache_dtype;
  absl::StatusOr<std::unique_ptr<CpuWorker>> worker = CpuWorker::Create(wo);
  if (!worker.ok()) return worker.status();

  SchedulerConfig sc;
  sc.block_size = options.block_size;
  sc.num_device_blocks = (*worker)->num_device_blocks();
  sc.num_host_blocks = (*worker)->num_host_blocks();
  sc.max_num_batched_tokens = options.max_num_batched_tokens;
  sc.max_num_seqs = options.max_num_seqs;
  std::string cap_note;
  absl::StatusOr<int32_t> max_model_len =
      ResolveMaxModelLen(options.max_model_len, (*worker)->config().MaxModelLen(),
                         RequestTokenSlots(sc), &cap_note);
  if (!max_model_len.ok()) return max_model_len.status();
  sc.max_model_len = *max_model_len;
  sc.sliding_window = (*worker)->config().CacheWindow();
  sc.enable_prefix_caching = options.enable_prefix_caching;
  sc.host_prefix_cache = options.host_prefix_cache;
  sc.preemption_mode = options.preemption_mode;
  sc.check_invariants = options.check_invariants;
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler = Scheduler::Create(sc);
  if (!scheduler.ok()) return scheduler.status();
  auto engine = std::unique_ptr<OfflineEngine>(
      new OfflineEngine(std::move(*tokenizer), std::move(*worker), std::move(*scheduler)));
  engine->max_model_len_note_ = std::move(cap_note);
  return engine;
}

OfflineEngine::OfflineEngine(std::unique_ptr<Tokenizer> tokenizer,
                             std::unique_ptr<CpuWorker> worker,
                             std::unique_ptr<Scheduler> scheduler)
    : tokenizer_(std::move(tokenizer)),
      worker_(std::move(worker)),
      scheduler_(std::move(scheduler)) {}

absl::StatusOr<std::vector<OfflineEngine::Result>> OfflineEngine::Generate(
    const std::vector<Request>& requests) {
  const ModelConfig& config = worker_->config();
  std::vector<Result> results(requests.size());
  absl::flat_hash_map<RequestId, size_t> slot;
  for (size_t i = 0; i < requests.size(); ++i) {
    const Request& in = requests[i];
    RequestSpec spec;
    spec.id = next_id_++;
    if (in.prompt_token_ids.has_value()) {
      spec.prompt = *in.prompt_token_ids;
    } else {
      spec.prompt = tokenizer_->EncodePrompt(in.prompt);
    }
    absl::Status s;
    if (in.truncate_prompt_tokens.has_value()) {
      s = TruncatePrompt(*in.truncate_prompt_tokens, scheduler_->config().max_model_len, &spec.prompt);
    }
    // The first id at or past the vocabulary, named by what holds it.
    auto check_vocab = [&](const char* what, TokenId t) {
      if (s.ok() && t >= config.vocab_size) {
        s = absl::InvalidArgumentError(absl::StrCat(what, " token id ", t,
                                                    " is out of vocabulary (size ",
                                                    config.vocab_size, ")"));
      }
    };
    for (TokenId t : spec.prompt) check_vocab("prompt", t);
    for (const TokenBias& b : in.sampling.logit_bias) check_vocab("logit_bias", b.token);
    for (TokenId t : in.sampling.allowed_token_ids) check_vocab("allowed_token_ids", t);
    spec.sampling = in.sampling;
    SortUniqueTokenIds(&spec.sampling.allowed_token_ids);
    if (s.ok() && !in.bad_words.empty()) {
      absl::StatusOr<std::vector<std::vector<TokenId>>> bad =
          BadWordsTokenIds(*tokenizer_, in.bad_words, "bad_words");
      if (bad.ok()) {
        spec.sampling.bad_words_token_ids = *std::move(bad);
      } else {
        s = bad.status();
      }
    }
    if (s.ok()) s = CheckAllowedTokensLeaveAChoice(spec.sampling, config.eos_token_ids);
    spec.eos_token_ids = config.eos_token_ids;
    results[i].prompt_token_ids = spec.prompt;
    slot[spec.id] = i;
    if (s.ok()) s = scheduler_->AddRequest(std::move(spec));
    if (!s.ok()) {
      // Take back what was queued so the engine stays usable.
      for (const auto& [id, unused] : slot) scheduler_->Abort(id);
      while (scheduler_->HasUnfinishedRequests()) {
        scheduler_->Schedule();
        (void)scheduler_->Update(StepResult{});
      }
      return absl::InvalidArgumentError(absl::StrCat("request ", i, ": ", s.message()));
    }
  }

  // Streamed deltas accumulate per sequence; ranked outputs arrive whole.
  while (scheduler_->HasUnfinishedRequests()) {
    const StepPlan plan = scheduler_->Schedule();
    absl::StatusOr<StepResult> step = worker_->Execute(plan);
    if (!step.ok()) return step.status();
    absl::StatusOr<std::vector<RequestOutput>> outputs = scheduler_->Update(*step);
    if (!outputs.ok()) return outputs.status();
    for (const RequestOutput& out : *outputs) {
      Result& r = results[slot.at(out.request_id)];
      r.num_cached_prompt_tokens = out.num_cached_prompt_tokens;
      if (!out.error.empty()) r.error = out.error;
      if (out.prompt_logprobs != nullptr) r.prompt_logprobs = *out.prompt_logprobs;
      for (const SequenceOutput& delta : out.sequences) {
        if (r.sequences.size() <= static_cast<size_t>(delta.index)) r.sequences.resize(delta.index + 1);
        Sequence& seq = r.sequences[delta.index];
        seq.index = delta.index;
        seq.token_ids.insert(seq.token_ids.end(), delta.token_ids.begin(), delta.token_ids.end());
        seq.logprobs.insert(seq.logprobs.end(), delta.logprobs.begin(), delta.logprobs.end());
        if (!delta.top_logprobs.empty()) {
          seq.top_logprobs.resize(seq.token_ids.size() - delta.token_ids.size());
          seq.top_logprobs.insert(seq.top_logprobs.end(), delta.top_logprobs.begin(),
                                  delta.top_logprobs.end());
        }
        if (delta.finish_reason != FinishReason::kNone) seq.finish_reason = delta.finish_reason;
        seq.cumulative_logprob = delta.cumulative_logprob;
      }
    }
  }
  for (Result& r : results) {
    // The text in context, as the server streams it (the first word keeps
    // the space a SentencePiece decoder strips from a standalone decode).
    for (Sequence& seq : r.sequences) {
      seq.text = IncrementalDetokenizer::Text(*tokenizer_, seq.token_ids);
    }
  }
  return results;
}

}  // namespace folio
