#ifndef FOLIO_COMMON_SAMPLING_PARAMS_H_
#define FOLIO_COMMON_SAMPLING_PARAMS_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "common/types.h"

namespace folio {

// How one request samples and when its sequences stop. Validated once, at the
// edge (ValidateSamplingParams); everything behind the edge trusts it.
// Top alternatives a request may ask for per token (vLLM's default cap).
inline constexpr int32_t kMaxLogprobs = 20;

// A bias added to one token's logit before sampling (OpenAI's logit_bias).
struct TokenBias {
  TokenId token = 0;
  float bias = 0.0f;
  friend bool operator==(const TokenBias&, const TokenBias&) = default;
};

// Largest |logit_bias| a request may set (OpenAI's range).
inline constexpr float kMaxLogitBias = 100.0f;

struct SamplingParams {
  // Sampling distribution (applied by the worker's sampler).
  float temperature = 1.0f;  // 0 = greedy
  int32_t top_k = 0;         // 0 = off
  float top_p = 1.0f;        // (0, 1]
  float min_p = 0.0f;        // [0, 1]
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::optional<uint64_t> seed;  // deterministic per (seed, sequence, position)
  int32_t logprobs = 0;          // how many top alternatives to return per token
  // Added to the logits before the penalties; ascending, distinct tokens.
  std::vector<TokenBias> logit_bias;

  // Fan-out: n returned sequences sampled from best_of candidates, or beam
  // search with beam_width beams (beam_width > 1 excludes n/best_of > 1).
  int32_t n = 1;
  int32_t best_of = 1;  // >= n
  int32_t beam_width = 1;
  float length_penalty = 1.0f;  // beam score = cum_logprob / len^length_penalty

  // Stop conditions.
  int32_t max_tokens = 16;
  // No EOS, stop token id or stop string ends a sequence with fewer output
  // tokens; the sampler bans end_token_ids until then.
  int32_t min_tokens = 0;
  bool ignore_eos = false;
  std::vector<TokenId> stop_token_ids;
  // Not set by clients: the scheduler fills it when it admits a request with
  // min_tokens > 0 (the model's EOS ids, even with ignore_eos as in vLLM,
  // then stop_token_ids), so workers know what to ban without knowing the
  // model's EOS.
  std::vector<TokenId> end_token_ids;

  // Score the prompt: each prompt token's log-prob given those before it,
  // with this many top alternatives; unset = not asked for. (Last: the
  // fields above are read every step, and keep their cache lines.)
  std::optional<int32_t> prompt_logprobs;
  // Sample only among these tokens (vLLM's allowed_token_ids); empty = all.
  // Ascending, distinct.
  std::vector<TokenId> allowed_token_ids;
  // vLLM's bad_words as token ids (BadWordsTokenIds, common/bad_words.h): a
  // word's last token is banned whenever the output ends with the rest.
  std::vector<std::vector<TokenId>> bad_words_token_ids;

  bool UsesBeamSearch() const { return beam_width > 1; }
  // Sequences alive at once after the prompt: best_of samples or the beams.
  int32_t NumParallelSequences() const { return UsesBeamSearch() ? beam_width : best_of; }
};

// Puts biases in the order SamplingParams::logit_bias needs: ascending
// tokens, one entry per token (the last one given wins).
void SortLogitBias(std::vector<TokenBias>* biases);
// Ascending, distinct (SamplingParams::allowed_token_ids' order).
void SortUniqueTokenIds(std::vector<TokenId>* ids);

// Left truncation of a prompt (vLLM's truncate_prompt_tokens): keeps the last
// k tokens, or with k = -1 the last max_model_len - 1 (room for one new
// token). INVALID_ARGUMENT "truncate_prompt_tokens must be ..." for k = 0,
// k < -1 or k > max_model_len.
absl::Status TruncatePrompt(int32_t k, int32_t max_model_len, std::vector<TokenId>* prompt);

// INVALID_ARGUMENT "allowed_token_ids leaves ..." when every allowed token
// is always banned: a one-token bad word or, with min_tokens > 0, a token
// that ends the sequence (eos_token_ids, stop_token_ids). OK without
// allowed_token_ids.
absl::Status CheckAllowedTokensLeaveAChoice(const SamplingParams& params,
                                            std::span<const TokenId> eos_token_ids);

// INVALID_ARGUMENT naming the offending field, e.g. "top_p must be in (0, 1]".
absl::Status ValidateSamplingParams(const SamplingParams& params);

}  // namespace folio

#endif  // FOLIO_COMMON_SAMPLING_PARAMS_H_
