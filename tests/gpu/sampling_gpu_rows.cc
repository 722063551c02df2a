#include "tests/gpu/sampling_gpu_rows.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace folio::kernels::sampling_check {

double LogprobErr(float got, float want) {
  return got == want ? 0.0 : std::fabs(double(got) - double(want));
}

void CompareList(const std::vector<ScoredToken>& want, const std::vector<ScoredToken>& got,
                 const std::vector<float>& values, Tally* t) {
  if (want.size() != got.size()) {
    ++t->bad_list;
    return;
  }
  for (size_t i = 0; i < want.size(); ++i) {
    ++t->listed;
    const int32_t id = got[i].token;
    if (id < 0 || id >= static_cast<int32_t>(values.size())) {
      ++t->bad_range;
      continue;
    }
    if (id == want[i].token) {
      ++t->listed_same;
    } else if (values[id] == values[want[i].token] ||
               std::fabs(values[id] - values[want[i].token]) <= 1e-6f) {
      ++t->listed_tie;
    } else {
      ++t->bad_list;
    }
    const double e = LogprobErr(got[i].logprob, values[id]);
    t->max_lp_err = std::max(t->max_lp_err, e);
    if (!(e <= 1e-4)) ++t->bad_logprob;
  }
}

void CompareRow(const Row& row, const RowResult& want, const RowResult& got, Tally* t) {
  const int32_t vocab = static_cast<int32_t>(row.logits.size());
  std::vector<float> raw(vocab);
  cpu::LogSoftmax(row.logits, raw);
  if (row.p.mode == SamplingMode::kBeam) {
    std::vector<float> pen = row.logits;
    cpu::ProcessLogits(row.p, pen);
    cpu::LogSoftmax(pen, pen);
    CompareList(want.samples, got.samples, pen, t);
    if (!got.top.empty()) ++t->bad_list;
    return;
  }
  CompareList(want.top, got.top, raw, t);
  if (want.samples.size() != got.samples.size()) {
    ++t->bad_list;
    return;
  }
  const bool greedy = row.p.temperature == 0.0f;
  for (size_t i = 0; i < want.samples.size(); ++i) {
    const int32_t id = got.samples[i].token;
    if (id < 0 || id >= vocab) {
      ++t->bad_range;
      continue;
    }
    const bool same = id == want.samples[i].token;
    if (greedy) {
      ++t->greedy;
      t->greedy_same += same;
      t->bad_greedy += !same;
    } else {
      ++t->drawn;
      t->drawn_same += same;
    }
    const double e = LogprobErr(got.samples[i].logprob, raw[id]);
    t->max_lp_err = std::max(t->max_lp_err, e);
    if (!(e <= 1e-4)) ++t->bad_logprob;
  }
}

std::vector<float> MakeLogits(int32_t vocab, bool coarse, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> v(vocab);
  for (float& x : v) {
    x = normal(rng);
    if (coarse) x = std::round(x * 4.0f) / 4.0f;
  }
  std::uniform_int_distribution<int32_t> pick(0, vocab - 1);
  const float top = *std::max_element(v.begin(), v.end()) + 0.5f;
  for (int i = 0; i < 3; ++i) v[pick(rng)] = top;  // greedy ties: lowest id wins
  if (vocab > 10) {
    v[pick(rng)] = -INFINITY;  // masked tokens
    v[pick(rng)] = -0.0f;
    v[pick(rng)] = 0.0f;
  }
  return v;
}

std::vector<int32_t> MakeHistory(int32_t vocab, int32_t len, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> tok(0, vocab - 1);
  std::vector<int32_t> h(len);
  for (int32_t& t : h) t = tok(rng);
  for (int32_t i = 0; i + 3 < len; i += 7) h[i + 1] = h[i];  // repeats
  if (len > 4) {
    h[2] = -1;  // ignored ids
    h[3] = vocab + 5;
  }
  return h;
}

std::vector<LogitBias> MakeBiases(BiasKind kind, const std::vector<float>& logits,
                                  std::mt19937& rng) {
  std::vector<LogitBias> b;
  if (kind == BiasKind::kNone) return b;
  const int32_t vocab = static_cast<int32_t>(logits.size());
  std::vector<bool> used(vocab, false);
  auto add = [&](int32_t t, float bias) {
    if (t >= 0 && t < vocab) {
      if (used[t]) return false;
      used[t] = true;
    }
    b.push_back({t, bias});
    return true;
  };
  const float max = *std::max_element(logits.begin(), logits.end());
  std::uniform_int_distribution<int32_t> pick(0, vocab - 1);
  switch (kind) {
    case BiasKind::kBan:
      for (int32_t t = 0; t < vocab; ++t) {
        if (logits[t] == max) add(t, -INFINITY);
      }
      for (int i = 0; i < 3; ++i) add(pick(rng), -INFINITY);
      break;
    case BiasKind::kBoost: {
      int32_t u = pick(rng);
      while (!(logits[u] < max) || std::isinf(logits[u])) u = pick(rng);
      add(u, (max - logits[u]) + 2.0f);
      for (int32_t t = 0; t < vocab; ++t) {
        if (logits[t] == max) add(t, -1.5f);
      }
      const float target = logits[u] + b[0].bias;
      for (int tries = 0; tries < 200; ++tries) {
        const int32_t w = pick(rng);
        if (used[w] || std::isinf(logits[w])) continue;
        const float bias = target - logits[w];
        if (logits[w] + bias == target) {
          add(w, bias);
          break;
        }
      }
      break;
    }
    case BiasKind::kMixed: {
      for (int32_t t = 0; t < vocab; ++t) {
        if (logits[t] == max) add(t, -INFINITY);
        if (std::isinf(logits[t])) add(t, 3.0f);
        if (logits[t] == 0.0f && std::signbit(logits[t])) add(t, 0.0f);
      }
      std::uniform_real_distribution<float> value(-8.0f, 8.0f);
      const int32_t n = std::min(vocab / 4, 2000);
      for (int32_t i = 0; i < n; ++i) {
        const int32_t t = pick(rng);
        const float v = value(rng);
        add(t, rng() % 10 == 0 ? -INFINITY : v);
      }
      add(-1, 5.0f);
      add(vocab, 5.0f);
      add(vocab + 7, -INFINITY);
      add(INT32_MIN, 1.0f);
      add(INT32_MAX, 1.0f);
      std::shuffle(b.begin(), b.end(), rng);
      break;
    }
    case BiasKind::kOutOfRange:
      add(-1, 50.0f);
      add(-100, -INFINITY);
      add(vocab, 50.0f);
      add(vocab + 1, -INFINITY);
      add(INT32_MAX, 1.0f);
      break;
    case BiasKind::kAllowed: {
      std::vector<int32_t> ids;
      for (int32_t t = 0; t < vocab; ++t) {
        if (logits[t] != max) ids.push_back(t);
      }
      std::shuffle(ids.begin(), ids.end(), rng);
      ids.resize(std::min<size_t>(ids.size(), static_cast<size_t>(std::min(vocab / 2, 40))));
      std::sort(ids.begin(), ids.end());
      std::uniform_real_distribution<float> value(-2.0f, 2.0f);
      for (size_t i = 0; i < ids.size(); ++i) {
        add(ids[i], i == 1 ? -INFINITY : i % 3 == 0 ? value(rng) : 0.0f);
      }
      break;
    }
    case BiasKind::kNone:
      break;
  }
  return b;
}

Row MakeRow(const Combo& c, int32_t vocab, bool coarse, uint64_t seed, std::mt19937& rng,
            BiasKind biases) {
  Row row;
  row.label = c.label;
  row.logits = MakeLogits(vocab, coarse, rng);
  row.bias_kind = biases;
  row.biases = MakeBiases(biases, row.logits, rng);
  row.prompt = MakeHistory(vocab, 40 + static_cast<int32_t>(rng() % 300), rng);
  row.output = MakeHistory(vocab, static_cast<int32_t>(rng() % 120), rng);
  // Make sure the penalties bite: the best tokens were generated before.
  const int32_t best = cpu::ArgMax(row.logits);
  row.output.push_back(best);
  row.output.push_back(best);
  SamplingRowParams& p = row.p;
  p.temperature = c.temperature;
  p.top_k = c.top_k;
  p.top_p = c.top_p;
  p.min_p = c.min_p;
  if (c.penalties) {
    p.repetition_penalty = 1.3f;
    p.presence_penalty = 0.4f;
    p.frequency_penalty = 0.25f;
  }
  p.num_samples = c.num_samples;
  p.mode = c.mode;
  p.num_top_logprobs = c.logprobs;
  for (int32_t s = 0; s < c.num_samples; ++s) {
    row.keys.push_back(cpu::SamplingKey(seed, 0, 0, static_cast<int32_t>(row.output.size()), s));
  }
  p.prompt_tokens = row.prompt;
  p.output_tokens = row.output;
  p.keys = row.keys;
  p.biases = row.biases;
  p.allowed_only = biases == BiasKind::kAllowed;
  return row;
}

bool BiasMustMoveGreedy(const Row& row) {
  if (row.p.mode != SamplingMode::kSample || row.p.temperature != 0.0f ||
      row.p.num_samples <= 0) {
    return false;
  }
  return row.bias_kind == BiasKind::kBan || row.bias_kind == BiasKind::kAllowed ||
         (row.bias_kind == BiasKind::kBoost && !row.p.HasPenalties());
}

}  // namespace folio::kernels::sampling_check
