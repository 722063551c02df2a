// Token sampling on the CPU: the std-only core of the worker's Sampler
// (worker/sampler.h adapts it to SamplingParams and SampledToken) and the
// reference twin of the CUDA sampler (kernels/cuda/sampling.cuh), which
// follows the same algorithm step for step.
//
// Per logits row:
//  - log-probs reported for chosen tokens and top-N lists are of the RAW model
//    distribution (log-softmax of the unprocessed logits);
//  - sampling applies, in order: logit biases (x += bias; -inf bans a token,
//    as min_tokens does with the tokens that would end the sequence; with
//    allowed_only every token without a bias entry is banned), then
//    penalties (repetition over every token seen
//    in prompt + output, once each; presence/frequency over output counts),
//    then greedy (temperature 0: argmax, lowest id among equal maxima), or:
//    candidates sorted by penalized logit descending (ties: lower id first),
//    top-k cut, softmax of the kept at temperature T, top-p (smallest prefix
//    whose mass reaches p, at least one token), min-p (drop tokens below
//    min_p times the most likely), then one cumulative search per sample with
//    u = (key >> 11) * 2^-53 * total mass kept;
//  - beam candidates: the num_samples best tokens of the processed (biased
//    and penalized) log-softmax, best first (ties: lower id first), with those log-probs.
//
// Thread-safety: free functions are pure; RowSampler is thread-compatible
// (one per thread: it keeps scratch buffers).
#ifndef FOLIO_KERNELS_CPU_SAMPLING_H_
#define FOLIO_KERNELS_CPU_SAMPLING_H_

#include <cstdint>
#include <span>
#include <vector>

namespace folio::kernels::cpu {

enum class SamplingMode : int32_t {
  kSample = 0,  // num_samples independent draws (+ optional top-N raw log-probs)
  kBeam = 1,    // the num_samples most likely tokens of the penalized distribution
};

// One additive edit of a logit, before the penalties: OpenAI's logit_bias,
// or -inf to ban a token.
struct LogitBias {
  int32_t token = 0;
  float bias = 0.0f;
};

// One row's sampling problem. Plain data; spans are borrowed for the call.
struct SamplingRowParams {
  float temperature = 1.0f;  // 0 = greedy
  int32_t top_k = 0;         // <= 0 or >= vocab: off
  float top_p = 1.0f;        // >= 1: off; <= 0 keeps the single best token
  float min_p = 0.0f;        // <= 0: off
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // Added to the logits before the penalties. REQUIRES: distinct tokens;
  // tokens outside [0, vocab) are ignored.
  std::span<const LogitBias> biases;
  // Every token without an entry in `biases` is banned (vLLM's
  // allowed_token_ids: the allowed ones are listed, bias 0 unless given).
  // REQUIRES: biases ascending when set.
  bool allowed_only = false;
  // Token history; ids outside [0, vocab) are ignored.
  std::span<const int32_t> prompt_tokens;
  std::span<const int32_t> output_tokens;
  int32_t num_samples = 1;
  SamplingMode mode = SamplingMode::kSample;
  int32_t num_top_logprobs = 0;  // kSample only
  // One key per sample (SamplingKey): REQUIRES keys.size() >= num_samples
  // when mode is kSample and temperature > 0. Unused otherwise.
  std::span<const uint64_t> keys;

  bool HasPenalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
  // Whether the logits sampling sees differ from the raw ones.
  bool ProcessesLogits() const { return HasPenalties() || !biases.empty() || allowed_only; }
};

struct ScoredToken {
  int32_t token = 0;
  float logprob = 0.0f;
};

// splitmix64's finalizer.
uint64_t SplitMix64(uint64_t x);

// The key of one draw, so that a sequence repeats its tokens when recomputed
// or re-batched: SplitMix64 chained over the seed, then request_part,
// sequence_index, position and sample_index (each XORed in, as uint64).
uint64_t SamplingKey(uint64_t seed, uint64_t request_part, int32_t sequence_index,
                     int32_t position, int32_t sample_index);

// The uniform in [0, 1) a key stands for: (key >> 11) * 2^-53.
inline double KeyToUnit(uint64_t key) { return static_cast<double>(key >> 11) * 0x1.0p-53; }

// log-softmax in float with a max shift, the sum of exps in double;
// `out` may alias `in`. REQUIRES: in.size() == out.size() > 0.
void LogSoftmax(std::span<const float> in, std::span<float> out);

// x += bias for every p.biases entry.
void ApplyLogitBiases(const SamplingRowParams& p, std::span<float> logits);

// Repetition (prompt + output tokens, once each: x > 0 ? x / r : x * r), then
// presence/frequency over output counts: x -= frequency * count + presence.
void ApplyPenalties(const SamplingRowParams& p, std::span<float> logits);

// What sampling sees: ApplyLogitBiases, then ApplyPenalties.
void ProcessLogits(const SamplingRowParams& p, std::span<float> logits);

// The first index of the largest value. REQUIRES: !v.empty().
int32_t ArgMax(std::span<const float> v);

// The n (capped at v.size()) best entries of v, best first, ties lower index
// first: {index, v[index]}. `scratch` is reused between calls.
void TopTokens(std::span<const float> v, int32_t n, std::vector<int32_t>* scratch,
               std::vector<ScoredToken>* out);

// The distribution a non-greedy draw samples from: order[0, keep) are the
// kept candidates, best first, with probabilities probs[0, keep) (softmax at
// T over the top-k cut, before the top-p/min-p cuts) summing to `total`.
struct DrawDistribution {
  std::vector<int32_t> order;
  std::vector<float> probs;
  int32_t keep = 0;
  double total = 0.0;
};

// REQUIRES: p.temperature > 0, !penalized.empty().
void PrepareDraw(std::span<const float> penalized, const SamplingRowParams& p,
                 DrawDistribution* d);

// The cumulative search: the first kept candidate i with u < sum(probs[0..i]),
// u = KeyToUnit(key) * total; the last kept one if rounding leaves none.
int32_t DrawToken(const DrawDistribution& d, uint64_t key);

class RowSampler {
 public:
  // kSample: samples gets num_samples tokens with their raw log-probs and
  // top gets the min(num_top_logprobs, vocab) best raw log-probs (empty when
  // 0). kBeam: samples gets the min(num_samples, vocab) candidates with their
  // processed log-probs; top is cleared. REQUIRES: !logits.empty().
  void Sample(std::span<const float> logits, const SamplingRowParams& p,
              std::vector<ScoredToken>* samples, std::vector<ScoredToken>* top);

 private:
  std::vector<float> penalized_;
  std::vector<float> logprobs_;
  std::vector<int32_t> scratch_;
  DrawDistribution draw_;
};

}  // namespace folio::kernels::cpu

#endif  // FOLIO_KERNELS_CPU_SAMPLING_H_
