#include "worker/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/container/flat_hash_map.h"
#include "common/check.h"

namespace folio {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

TokenId ArgMax(std::span<const float> v) {
  return static_cast<TokenId>(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace

void LogSoftmax(std::span<const float> in, std::span<float> out) {
  FOLIO_CHECK_EQ(in.size(), out.size());
  const float max = *std::max_element(in.begin(), in.end());
  double sum = 0.0;
  for (float x : in) sum += std::exp(static_cast<double>(x - max));
  // (x - max) - log(sum): subtracting max first keeps precision at large logits.
  const float log_sum = static_cast<float>(std::log(sum));
  for (size_t i = 0; i < in.size(); ++i) out[i] = (in[i] - max) - log_sum;
}

void Sampler::ApplyPenalties(const SamplingRequest& r, std::vector<float>& logits) const {
  const SamplingParams& p = *r.params;
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool additive = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  if (!repetition && !additive) return;
  const int32_t vocab = static_cast<int32_t>(logits.size());
  if (repetition) {
    // Every token seen, prompt or output, once (as HF and vLLM do).
    std::vector<bool> seen(vocab, false);
    auto mark = [&](std::span<const TokenId> ts) {
      for (TokenId t : ts) {
        if (t >= 0 && t < vocab) seen[t] = true;
      }
    };
    mark(r.prompt_tokens);
    mark(r.output_tokens);
    for (int32_t t = 0; t < vocab; ++t) {
      if (!seen[t]) continue;
      logits[t] = logits[t] > 0 ? logits[t] / p.repetition_penalty : logits[t] * p.repetition_penalty;
    }
  }
  if (additive) {
    // OpenAI-style, over generated tokens only.
    absl::flat_hash_map<TokenId, int32_t> counts;
    for (TokenId t : r.output_tokens) {
      if (t >= 0 && t < vocab) ++counts[t];
    }
    for (const auto& [t, n] : counts) {
      logits[t] -= p.frequency_penalty * static_cast<float>(n) + p.presence_penalty;
    }
  }
}

TokenId Sampler::Draw(const SamplingRequest& r, int32_t sample_index) {
  const SamplingParams& p = *r.params;
  const int32_t vocab = static_cast<int32_t>(logits_.size());
  if (p.temperature == 0.0f) return ArgMax(logits_);

  // Candidates, most likely first; top-k cuts the list.
  order_.resize(vocab);
  std::iota(order_.begin(), order_.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits_[a] > logits_[b] || (logits_[a] == logits_[b] && a < b);
  };
  int32_t keep = vocab;
  if (p.top_k > 0 && p.top_k < vocab) {
    keep = p.top_k;
    std::partial_sort(order_.begin(), order_.begin() + keep, order_.end(), by_logit);
  } else {
    std::sort(order_.begin(), order_.end(), by_logit);
  }
  // Softmax over the kept candidates at temperature T.
  probs_.resize(keep);
  const float max = logits_[order_[0]];
  double sum = 0.0;
  for (int32_t i = 0; i < keep; ++i) {
    probs_[i] = std::exp((logits_[order_[i]] - max) / p.temperature);
    sum += probs_[i];
  }
  for (int32_t i = 0; i < keep; ++i) probs_[i] = static_cast<float>(probs_[i] / sum);
  // top-p: the smallest prefix whose mass reaches p (at least one token).
  if (p.top_p < 1.0f) {
    double mass = 0.0;
    int32_t n = 0;
    while (n < keep && mass < p.top_p) mass += probs_[n++];
    keep = std::max(1, n);
  }
  // min-p: drop tokens below min_p times the most likely one.
  if (p.min_p > 0.0f) {
    const float floor = p.min_p * probs_[0];
    int32_t n = 1;
    while (n < keep && probs_[n] >= floor) ++n;
    keep = n;
  }
  double total = 0.0;
  for (int32_t i = 0; i < keep; ++i) total += probs_[i];

  // A request's own seed reproduces its draws whatever its engine-internal
  // id (same seed and prompt, same tokens, as in vLLM and the OpenAI API);
  // unseeded requests share the default seed, so they key on the request too.
  const bool seeded = r.params->seed.has_value();
  const uint64_t seed = seeded ? *r.params->seed : default_seed_;
  const uint64_t request_part = seeded ? 0 : static_cast<uint64_t>(r.request_id);
  const int32_t position = static_cast<int32_t>(r.output_tokens.size());
  uint64_t key = Mix(seed);
  for (uint64_t part : {request_part, static_cast<uint64_t>(r.sequence_index),
                        static_cast<uint64_t>(position), static_cast<uint64_t>(sample_index)}) {
    key = Mix(key ^ part);
  }
  const double u = static_cast<double>(key >> 11) * 0x1.0p-53 * total;
  double acc = 0.0;
  for (int32_t i = 0; i < keep; ++i) {
    acc += probs_[i];
    if (u < acc) return order_[i];
  }
  return order_[keep - 1];
}

std::vector<TokenLogprob> Sampler::TopLogprobs(int32_t n) {
  const int32_t vocab = static_cast<int32_t>(logprobs_.size());
  n = std::min(n, vocab);
  std::vector<TokenLogprob> out;
  if (n <= 0) return out;
  top_order_.resize(vocab);
  std::iota(top_order_.begin(), top_order_.end(), 0);
  auto better = [&](int32_t a, int32_t b) {
    return logprobs_[a] > logprobs_[b] || (logprobs_[a] == logprobs_[b] && a < b);
  };
  // Select, then sort only the n kept: O(vocab + n log n).
  if (n < vocab) std::nth_element(top_order_.begin(), top_order_.begin() + n, top_order_.end(), better);
  std::sort(top_order_.begin(), top_order_.begin() + n, better);
  out.reserve(n);
  for (int32_t i = 0; i < n; ++i) out.push_back({top_order_[i], logprobs_[top_order_[i]]});
  return out;
}

std::vector<SampledToken> Sampler::Sample(const SamplingRequest& r) {
  FOLIO_CHECK(r.params != nullptr);
  FOLIO_CHECK(!r.logits.empty());
  const int32_t vocab = static_cast<int32_t>(r.logits.size());
  logprobs_.resize(vocab);
  LogSoftmax(r.logits, logprobs_);
  logits_.assign(r.logits.begin(), r.logits.end());
  ApplyPenalties(r, logits_);

  std::vector<SampledToken> out;
  if (r.mode == SampleMode::kBeamCandidates) {
    // Beam search ranks by the (penalized) model distribution.
    std::vector<float> beam_logprobs(vocab);
    LogSoftmax(logits_, beam_logprobs);
    const int32_t n = std::min(r.num_samples, vocab);
    order_.resize(vocab);
    std::iota(order_.begin(), order_.end(), 0);
    std::partial_sort(order_.begin(), order_.begin() + n, order_.end(), [&](int32_t a, int32_t b) {
      return beam_logprobs[a] > beam_logprobs[b] || (beam_logprobs[a] == beam_logprobs[b] && a < b);
    });
    for (int32_t i = 0; i < n; ++i) out.push_back({order_[i], beam_logprobs[order_[i]], {}});
    return out;
  }
  // One distribution per call: every sample shares its top log-probs.
  const std::vector<TokenLogprob> top = TopLogprobs(r.params->logprobs);
  out.reserve(r.num_samples);
  for (int32_t i = 0; i < r.num_samples; ++i) {
    const TokenId t = Draw(r, i);
    out.push_back({t, logprobs_[t], top});
  }
  return out;
}

}  // namespace folio
