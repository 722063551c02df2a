#include "worker/sampler.h"

#include <algorithm>
#include <limits>

#include "common/check.h"

namespace folio {

void LogSoftmax(std::span<const float> in, std::span<float> out) {
  FOLIO_CHECK_EQ(in.size(), out.size());
  kernels::cpu::LogSoftmax(in, out);
}

namespace {

// The request's logit_bias with its end tokens banned (-inf) while fewer than
// min_tokens tokens are out: ascending, distinct tokens.
void RowBiases(const SamplingParams& p, size_t num_output_tokens,
               std::vector<kernels::cpu::LogitBias>* out) {
  out->clear();
  for (const TokenBias& b : p.logit_bias) out->push_back({b.token, b.bias});
  if (num_output_tokens >= static_cast<size_t>(p.min_tokens) || p.end_token_ids.empty()) return;
  for (TokenId t : p.end_token_ids) out->push_back({t, -std::numeric_limits<float>::infinity()});
  // A ban overrides a bias on the same token: sort bans first within a token.
  std::stable_sort(out->begin(), out->end(), [](const auto& a, const auto& b) {
    return a.token != b.token ? a.token < b.token : a.bias < b.bias;
  });
  out->erase(std::unique(out->begin(), out->end(),
                         [](const auto& a, const auto& b) { return a.token == b.token; }),
             out->end());
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
  RowBiases(p, r.output_tokens.size(), &scratch->biases);
  row.biases = scratch->biases;
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

}  // namespace folio
