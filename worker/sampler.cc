#include "worker/sampler.h"

#include <algorithm>
#include <atomic>
#include <limits>

#include "common/bad_words.h"
#include "common/check.h"
#include "kernels/cpu/threads.h"

namespace folio {

void LogSoftmax(std::span<const float> in, std::span<float> out) {
  FOLIO_CHECK_EQ(in.size(), out.size());
  kernels::cpu::LogSoftmax(in, out);
}

namespace {

// The row's bias list: the request's logit_bias, -inf on its end tokens
// while fewer than min_tokens tokens are out and on the bad words' next
// tokens; ascending, distinct tokens (a ban overrides a bias). With
// allowed_token_ids: exactly the allowed tokens (bias 0 unless given), and
// the sampler bans the rest (allowed_only).
void RowBiases(const SamplingParams& p, std::span<const TokenId> output,
               Sampler::RowScratch* scratch) {
  constexpr float kBan = -std::numeric_limits<float>::infinity();
  std::vector<kernels::cpu::LogitBias>* list =
      p.allowed_token_ids.empty() ? &scratch->biases : &scratch->merged;
  list->clear();
  for (const TokenBias& b : p.logit_bias) list->push_back({b.token, b.bias});
  const size_t given = list->size();
  if (output.size() < static_cast<size_t>(p.min_tokens)) {
    for (TokenId t : p.end_token_ids) list->push_back({t, kBan});
  }
  scratch->banned.clear();
  BannedByBadWords(p.bad_words_token_ids, output, &scratch->banned);
  for (TokenId t : scratch->banned) list->push_back({t, kBan});
  if (list->size() > given) {
    // Bans first within a token, then one entry per token.
    std::stable_sort(list->begin(), list->end(), [](const auto& a, const auto& b) {
      return a.token != b.token ? a.token < b.token : a.bias < b.bias;
    });
    list->erase(std::unique(list->begin(), list->end(),
                            [](const auto& a, const auto& b) { return a.token == b.token; }),
                list->end());
  }
  if (p.allowed_token_ids.empty()) return;
  // Both ascending: keep the allowed tokens, each with its entry or 0.
  scratch->biases.clear();
  auto it = list->begin();
  for (TokenId t : p.allowed_token_ids) {
    while (it != list->end() && it->token < t) ++it;
    scratch->biases.push_back({t, it != list->end() && it->token == t ? it->bias : 0.0f});
  }
}

}  // namespace

kernels::cpu::SamplingRowParams Sampler::RowParams(const SamplingRequest& r,
                                                   RowScratch* scratch) const {
  std::vector<uint64_t>* keys = &scratch->keys;
  const SamplingParams& p = *r.params;
  kernels::cpu::SamplingRowParams row;
  row.temperature = p.temperature;
  row.top_k = p.top_k;
  row.top_p = p.top_p;
  row.min_p = p.min_p;
  row.repetition_penalty = p.repetition_penalty;
  row.presence_penalty = p.presence_penalty;
  row.frequency_penalty = p.frequency_penalty;
  row.prompt_tokens = r.prompt_tokens;
  row.output_tokens = r.output_tokens;
  row.num_samples = r.num_samples;
  row.mode = r.mode == SampleMode::kBeamCandidates ? kernels::cpu::SamplingMode::kBeam
                                                    : kernels::cpu::SamplingMode::kSample;
  row.num_top_logprobs = p.logprobs;
  // A request's own seed reproduces its draws whatever its engine-internal
  // id (same seed and prompt, same tokens, as in vLLM and the OpenAI API);
  // unseeded requests share the default seed, so they key on the request too.
  keys->clear();
  if (row.mode == kernels::cpu::SamplingMode::kSample && p.temperature != 0.0f) {
    const bool seeded = p.seed.has_value();
    const uint64_t seed = seeded ? *p.seed : default_seed_;
    const uint64_t request_part = seeded ? 0 : static_cast<uint64_t>(r.request_id);
    const int32_t position = static_cast<int32_t>(r.output_tokens.size());
    for (int32_t i = 0; i < r.num_samples; ++i) {
      keys->push_back(kernels::cpu::SamplingKey(seed, request_part, r.sequence_index, position, i));
    }
  }
  row.keys = *keys;
  RowBiases(p, r.output_tokens, scratch);
  row.biases = scratch->biases;
  row.allowed_only = !p.allowed_token_ids.empty();
  return row;
}

std::vector<SampledToken> Sampler::Sample(const SamplingRequest& r) {
  FOLIO_CHECK(r.params != nullptr);
  FOLIO_CHECK(!r.logits.empty());
  const kernels::cpu::SamplingRowParams row = RowParams(r, &scratch_);
  core_.Sample(r.logits, row, &samples_, &top_);

  std::vector<TokenLogprob> top;
  top.reserve(top_.size());
  for (const kernels::cpu::ScoredToken& t : top_) top.push_back({t.token, t.logprob});
  std::vector<SampledToken> out;
  out.reserve(samples_.size());
  for (const kernels::cpu::ScoredToken& s : samples_) out.push_back({s.token, s.logprob, top});
  return out;
}

void BatchSampler::SampleRows(std::span<const SamplingRequest> rows,
                              std::vector<std::vector<SampledToken>>* out) {
  out->resize(rows.size());
  // Below a few rows of a small vocabulary a parallel region costs more than
  // it saves.
  constexpr size_t kMinParallelLogits = size_t{1} << 15;
  const size_t logits = rows.empty() ? 0 : rows.size() * rows[0].logits.size();
  const int32_t threads =
      logits < kMinParallelLogits ? 1 : std::min<int32_t>(kernels::cpu::KernelThreads(),
                                                          static_cast<int32_t>(rows.size()));
  while (samplers_.size() < static_cast<size_t>(threads)) samplers_.emplace_back(default_seed_);
  if (threads <= 1) {
    for (size_t i = 0; i < rows.size(); ++i) (*out)[i] = samplers_[0].Sample(rows[i]);
    return;
  }
  // Rows vary in cost (penalties, top-p sorts): each thread takes the next
  // unclaimed one.
  std::atomic<size_t> next{0};
  kernels::cpu::ParallelFor(threads, [&](int64_t t) {
    Sampler& sampler = samplers_[t];
    for (size_t i = next.fetch_add(1); i < rows.size(); i = next.fetch_add(1)) {
      (*out)[i] = sampler.Sample(rows[i]);
    }
  });
}

}  // namespace folio
