#ifndef FOLIO_WORKER_SAMPLER_H_
#define FOLIO_WORKER_SAMPLER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "common/sampling_params.h"
#include "common/step_plan.h"
#include "kernels/cpu/sampling.h"

namespace folio {

// One sequence's sampling problem: its logits row and what shapes them.
struct SamplingRequest {
  std::span<const float> logits;  // raw model logits, vocab-sized
  const SamplingParams* params = nullptr;
  std::span<const TokenId> prompt_tokens;
  std::span<const TokenId> output_tokens;
  // Sampling keys on (seed, sequence index, output position, sample index),
  // so a recomputed or re-batched sequence repeats its tokens. A request with
  // its own params->seed repeats them across requests too; one without uses
  // the sampler's default seed and also keys on request_id.
  RequestId request_id = 0;
  int32_t sequence_index = 0;
  SampleMode mode = SampleMode::kSample;
  int32_t num_samples = 1;
};

// Rank 0's sampler. Log-probs are always of the raw model distribution
// (log-softmax of the unprocessed logits), as vLLM reports them by default
// (its logprobs_mode "raw_logprobs"), not of the processed distribution the
// token was drawn from; sampling applies logit biases (with min_tokens'
// bans), penalties, temperature, top-k, top-p and min-p in that order.
// Greedy (temperature 0) picks the lowest id among equal maxima.
//
// Top log-probs: when params->logprobs = N > 0, every kSample token carries
// the N most likely tokens of that same raw distribution, best first (ties:
// lower id first), in SampledToken::top_logprobs. Like vLLM, the chosen
// token is reported through SampledToken::logprob and need not be among
// them (it is, for greedy). Beam candidates carry none.
//
// The algorithm itself is kernels/cpu/sampling.h (std-only, the twin of the
// CUDA sampler); this class adapts requests and results to it.
//
// Thread-compatible: one Sampler per thread (it keeps scratch buffers).
class Sampler {
 public:
  // `default_seed` seeds requests that bring no seed of their own.
  explicit Sampler(uint64_t default_seed) : default_seed_(default_seed) {}

  // kSample: num_samples independent draws. kBeamCandidates: the
  // num_samples most likely tokens under the penalized distribution, best first.
  std::vector<SampledToken> Sample(const SamplingRequest& request);

  // What a row's parameters borrow: its sampling keys, one per sample, and
  // its logit biases (the request's logit_bias, plus -inf on its
  // end_token_ids while fewer than min_tokens tokens are out).
  struct RowScratch {
    std::vector<uint64_t> keys;
    std::vector<kernels::cpu::LogitBias> biases;
    std::vector<kernels::cpu::LogitBias> merged;  // RowBiases' work list
    std::vector<TokenId> banned;
  };

  // The core's parameters for `request`; the spans borrow `scratch`, which
  // must outlive their use.
  kernels::cpu::SamplingRowParams RowParams(const SamplingRequest& request,
                                            RowScratch* scratch) const;

 private:
  const uint64_t default_seed_;
  kernels::cpu::RowSampler core_;
  RowScratch scratch_;
  std::vector<kernels::cpu::ScoredToken> samples_;
  std::vector<kernels::cpu::ScoredToken> top_;
};

// Samples many rows at once, spread over the kernel threads, one Sampler
// each: a row's draws depend only on its request (the keys above), so the
// tokens are the same whatever thread takes it. A decode step of 64
// sequences otherwise samples on one thread while the others wait.
//
// Thread-compatible; call it from the thread that runs the kernels.
class BatchSampler {
 public:
  explicit BatchSampler(uint64_t default_seed) : default_seed_(default_seed) {}

  // out[i] = Sample(rows[i]).
  void SampleRows(std::span<const SamplingRequest> rows,
                  std::vector<std::vector<SampledToken>>* out);

 private:
  const uint64_t default_seed_;
  std::vector<Sampler> samplers_;  // one per kernel thread, made on demand
};

// log-softmax in float with a max shift; `out` may alias `in`.
void LogSoftmax(std::span<const float> in, std::span<float> out);

}  // namespace folio

#endif  // FOLIO_WORKER_SAMPLER_H_
