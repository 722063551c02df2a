#include "kernels/cpu/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "kernels/cpu/vec_math.h"

namespace folio::kernels::cpu {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t SamplingKey(uint64_t seed, uint64_t request_part, int32_t sequence_index,
                     int32_t position, int32_t sample_index) {
  uint64_t key = SplitMix64(seed);
  for (uint64_t part : {request_part, static_cast<uint64_t>(sequence_index),
                        static_cast<uint64_t>(position), static_cast<uint64_t>(sample_index)}) {
    key = SplitMix64(key ^ part);
  }
  return key;
}

// Vectorized: a libm exp per token was most of a greedy row's cost (7 µs of
// a 1459-token row). FastExp is within a few ulp of exp; the sum stays in
// double, so a 150k-token vocabulary loses no precision to it.
FOLIO_SIMD_CLONES void LogSoftmax(std::span<const float> in, std::span<float> out) {
  const float* x = in.data();
  float* o = out.data();  // may be x: each element is read before it is written
  const size_t n = in.size();
  const float max = MaxOf(x, static_cast<int64_t>(n));
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(FastExp(x[i] - max));
  // (x - max) - log(sum): subtracting max first keeps precision at large logits.
  const float log_sum = static_cast<float>(std::log(sum));
#pragma omp simd
  for (size_t i = 0; i < n; ++i) o[i] = (x[i] - max) - log_sum;
}

void ApplyLogitBiases(const SamplingRowParams& p, std::span<float> logits) {
  const int32_t vocab = static_cast<int32_t>(logits.size());
  if (p.allowed_only) {
    // One pass over the row and the ascending biases together.
    size_t j = 0;
    for (int32_t t = 0; t < vocab; ++t) {
      while (j < p.biases.size() && p.biases[j].token < t) ++j;
      if (j < p.biases.size() && p.biases[j].token == t) {
        logits[t] += p.biases[j].bias;
      } else {
        logits[t] = -std::numeric_limits<float>::infinity();
      }
    }
    return;
  }
  for (const LogitBias& b : p.biases) {
    if (b.token >= 0 && b.token < vocab) logits[b.token] += b.bias;
  }
}

void ProcessLogits(const SamplingRowParams& p, std::span<float> logits) {
  ApplyLogitBiases(p, logits);
  ApplyPenalties(p, logits);
}

void ApplyPenalties(const SamplingRowParams& p, std::span<float> logits) {
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool additive = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  if (!repetition && !additive) return;
  const int32_t vocab = static_cast<int32_t>(logits.size());
  if (repetition) {
    // Every token seen, prompt or output, once (as HF and vLLM do).
    std::vector<bool> seen(vocab, false);
    auto mark = [&](std::span<const int32_t> ts) {
      for (int32_t t : ts) {
        if (t >= 0 && t < vocab) seen[t] = true;
      }
    };
    mark(p.prompt_tokens);
    mark(p.output_tokens);
    for (int32_t t = 0; t < vocab; ++t) {
      if (!seen[t]) continue;
      logits[t] = logits[t] > 0 ? logits[t] / p.repetition_penalty : logits[t] * p.repetition_penalty;
    }
  }
  if (additive) {
    // OpenAI-style, over generated tokens only.
    std::unordered_map<int32_t, int32_t> counts;
    for (int32_t t : p.output_tokens) {
      if (t >= 0 && t < vocab) ++counts[t];
    }
    for (const auto& [t, n] : counts) {
      logits[t] -= p.frequency_penalty * static_cast<float>(n) + p.presence_penalty;
    }
  }
}

int32_t ArgMax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

void TopTokens(std::span<const float> v, int32_t n, std::vector<int32_t>* scratch,
               std::vector<ScoredToken>* out) {
  const int32_t size = static_cast<int32_t>(v.size());
  n = std::min(n, size);
  out->clear();
  if (n <= 0) return;
  std::vector<int32_t>& order = *scratch;
  order.resize(size);
  std::iota(order.begin(), order.end(), 0);
  auto better = [&](int32_t a, int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); };
  // Select, then sort only the n kept: O(size + n log n).
  if (n < size) std::nth_element(order.begin(), order.begin() + n, order.end(), better);
  std::sort(order.begin(), order.begin() + n, better);
  out->reserve(n);
  for (int32_t i = 0; i < n; ++i) out->push_back({order[i], v[order[i]]});
}

void PrepareDraw(std::span<const float> logits, const SamplingRowParams& p, DrawDistribution* d) {
  const int32_t vocab = static_cast<int32_t>(logits.size());
  std::vector<int32_t>& order = d->order;
  std::vector<float>& probs = d->probs;
  // Candidates, most likely first; top-k cuts the list.
  order.resize(vocab);
  std::iota(order.begin(), order.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  int32_t keep = vocab;
  if (p.top_k > 0 && p.top_k < vocab) {
    keep = p.top_k;
    std::partial_sort(order.begin(), order.begin() + keep, order.end(), by_logit);
  } else {
    std::sort(order.begin(), order.end(), by_logit);
  }
  // Softmax over the kept candidates at temperature T.
  probs.resize(keep);
  const float max = logits[order[0]];
  double sum = 0.0;
  for (int32_t i = 0; i < keep; ++i) {
    probs[i] = std::exp((logits[order[i]] - max) / p.temperature);
    sum += probs[i];
  }
  for (int32_t i = 0; i < keep; ++i) probs[i] = static_cast<float>(probs[i] / sum);
  // top-p: the smallest prefix whose mass reaches p (at least one token).
  if (p.top_p < 1.0f) {
    double mass = 0.0;
    int32_t n = 0;
    while (n < keep && mass < p.top_p) mass += probs[n++];
    keep = std::max(1, n);
  }
  // min-p: drop tokens below min_p times the most likely one.
  if (p.min_p > 0.0f) {
    const float floor = p.min_p * probs[0];
    int32_t n = 1;
    while (n < keep && probs[n] >= floor) ++n;
    keep = n;
  }
  double total = 0.0;
  for (int32_t i = 0; i < keep; ++i) total += probs[i];
  d->keep = keep;
  d->total = total;
}

int32_t DrawToken(const DrawDistribution& d, uint64_t key) {
  const double u = KeyToUnit(key) * d.total;
  double acc = 0.0;
  for (int32_t i = 0; i < d.keep; ++i) {
    acc += d.probs[i];
    if (u < acc) return d.order[i];
  }
  return d.order[d.keep - 1];
}

void RowSampler::Sample(std::span<const float> logits, const SamplingRowParams& p,
                        std::vector<ScoredToken>* samples, std::vector<ScoredToken>* top) {
  const int32_t vocab = static_cast<int32_t>(logits.size());
  samples->clear();
  top->clear();
  logprobs_.resize(vocab);
  LogSoftmax(logits, logprobs_);
  penalized_.assign(logits.begin(), logits.end());
  ProcessLogits(p, penalized_);

  if (p.mode == SamplingMode::kBeam) {
    // Beam search ranks by the processed (biased, penalized) distribution.
    LogSoftmax(penalized_, penalized_);
    TopTokens(penalized_, p.num_samples, &scratch_, samples);
    return;
  }
  // One distribution per call: every sample shares its top log-probs.
  TopTokens(logprobs_, p.num_top_logprobs, &scratch_, top);
  if (p.num_samples <= 0) return;
  samples->reserve(p.num_samples);
  if (p.temperature == 0.0f) {
    const int32_t t = ArgMax(penalized_);
    for (int32_t i = 0; i < p.num_samples; ++i) samples->push_back({t, logprobs_[t]});
    return;
  }
  PrepareDraw(penalized_, p, &draw_);
  for (int32_t i = 0; i < p.num_samples; ++i) {
    const int32_t t = DrawToken(draw_, p.keys[i]);
    samples->push_back({t, logprobs_[t]});
  }
}

}  // namespace folio::kernels::cpu
