// The rows sampling_gpu_check.cu runs on both devices: random logits,
// histories and logit biases, the parameter combos, and the comparison of a
// GPU row's result with the CPU core's (kernels/cpu/sampling.h). Host code
// only (std + the CPU sampler), so that the check itself keeps to the CUDA
// calls and the cases.
#ifndef FOLIO_TESTS_GPU_SAMPLING_GPU_ROWS_H_
#define FOLIO_TESTS_GPU_SAMPLING_GPU_ROWS_H_

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/sampling.h"

namespace folio::kernels::sampling_check {

using cpu::LogitBias;
using cpu::SamplingMode;
using cpu::SamplingRowParams;
using cpu::ScoredToken;

// The logit biases of a row (see MakeBiases).
enum class BiasKind { kNone, kBan, kBoost, kMixed, kOutOfRange, kAllowed };

// One row of a batch with the storage its params' spans borrow.
struct Row {
  std::vector<float> logits;
  std::vector<int32_t> prompt, output;
  std::vector<uint64_t> keys;
  std::vector<LogitBias> biases;
  SamplingRowParams p;  // its spans point into the vectors above
  std::string label;
  BiasKind bias_kind = BiasKind::kNone;
  // >= 0: a prompt-scoring row (GpuSamplingBatch::AddScoring) for this token
  // with p.num_top_logprobs.
  int32_t score_target = -1;

  // Move-only: a copy would keep spans into the source's vectors (moving a
  // vector keeps its buffer, copying does not).
  Row() = default;
  Row(Row&&) = default;
  Row& operator=(Row&&) = default;
  Row(const Row&) = delete;
  Row& operator=(const Row&) = delete;
};

// Results of one row, CPU or GPU.
struct RowResult {
  std::vector<ScoredToken> samples;
  std::vector<ScoredToken> top;
  float token_logprob = NAN;  // scoring rows
};

// What the comparisons counted, over one check.
struct Tally {
  int64_t greedy = 0, greedy_same = 0;
  int64_t drawn = 0, drawn_same = 0;
  int64_t listed = 0, listed_same = 0, listed_tie = 0;
  int64_t bad_list = 0, bad_greedy = 0, bad_logprob = 0, bad_range = 0;
  double max_lp_err = 0;
};

struct Combo {
  const char* label;
  float temperature;
  int32_t top_k;
  float top_p, min_p;
  bool penalties;
  int32_t num_samples;
  SamplingMode mode;
  int32_t logprobs;
};

inline constexpr Combo kCombos[] = {
    {"greedy", 0.0f, 0, 1.0f, 0.0f, false, 1, SamplingMode::kSample, 0},
    {"greedy+pen+lp5", 0.0f, 0, 1.0f, 0.0f, true, 2, SamplingMode::kSample, 5},
    {"greedy+lp20", 0.0f, 40, 0.5f, 0.0f, false, 1, SamplingMode::kSample, 20},
    {"T0.7", 0.7f, 0, 1.0f, 0.0f, false, 8, SamplingMode::kSample, 0},
    {"T1+topk40", 1.0f, 40, 1.0f, 0.0f, false, 8, SamplingMode::kSample, 0},
    {"T1.2+topk200", 1.2f, 200, 1.0f, 0.0f, false, 8, SamplingMode::kSample, 3},
    {"T0.8+topp0.9", 0.8f, 0, 0.9f, 0.0f, false, 8, SamplingMode::kSample, 0},
    {"T1+minp0.05", 1.0f, 0, 1.0f, 0.05f, false, 8, SamplingMode::kSample, 0},
    {"T0.9+topk50+topp0.8+minp0.02+pen", 0.9f, 50, 0.8f, 0.02f, true, 8, SamplingMode::kSample, 4},
    {"T1+pen+lp20", 1.0f, 0, 1.0f, 0.0f, true, 8, SamplingMode::kSample, 20},
    {"T1.5+topp0.95+minp0.1+pen", 1.5f, 0, 0.95f, 0.1f, true, 8, SamplingMode::kSample, 0},
    {"topk1", 1.0f, 1, 1.0f, 0.0f, false, 4, SamplingMode::kSample, 1},
    {"topp0.01", 1.0f, 0, 0.01f, 0.0f, false, 4, SamplingMode::kSample, 0},
    {"topk=vocab", 0.6f, 1 << 30, 1.0f, 0.0f, false, 4, SamplingMode::kSample, 0},
    {"topk64+topp0.7", 2.0f, 64, 0.7f, 0.0f, true, 8, SamplingMode::kSample, 0},
    {"lp_only", 1.0f, 0, 1.0f, 0.0f, false, 0, SamplingMode::kSample, 7},
    {"beam4", 0.7f, 0, 1.0f, 0.0f, false, 4, SamplingMode::kBeam, 0},
    {"beam8+pen", 1.0f, 0, 1.0f, 0.0f, true, 8, SamplingMode::kBeam, 0},
    {"beam100+pen", 1.0f, 0, 1.0f, 0.0f, true, 100, SamplingMode::kBeam, 0},
};

struct BiasCombo {
  Combo combo;
  BiasKind biases;
};

inline constexpr BiasCombo kBiasCombos[] = {
    {{"greedy+ban", 0.0f, 0, 1.0f, 0.0f, false, 1, SamplingMode::kSample, 3}, BiasKind::kBan},
    {{"greedy+boost", 0.0f, 0, 1.0f, 0.0f, false, 2, SamplingMode::kSample, 0}, BiasKind::kBoost},
    {{"greedy+pen+ban", 0.0f, 0, 1.0f, 0.0f, true, 1, SamplingMode::kSample, 0}, BiasKind::kBan},
    {{"greedy+pen+mixed+lp5", 0.0f, 0, 1.0f, 0.0f, true, 1, SamplingMode::kSample, 5},
     BiasKind::kMixed},
    {{"greedy+oob", 0.0f, 0, 1.0f, 0.0f, false, 1, SamplingMode::kSample, 2},
     BiasKind::kOutOfRange},
    {{"topk1+boost", 1.0f, 1, 1.0f, 0.0f, false, 4, SamplingMode::kSample, 0}, BiasKind::kBoost},
    {{"T1+topk40+mixed", 1.0f, 40, 1.0f, 0.0f, false, 8, SamplingMode::kSample, 3},
     BiasKind::kMixed},
    {{"T0.9+topk50+topp0.8+pen+ban", 0.9f, 50, 0.8f, 0.0f, true, 8, SamplingMode::kSample, 0},
     BiasKind::kBan},
    {{"T1+topk40+oob", 1.0f, 40, 1.0f, 0.0f, false, 8, SamplingMode::kSample, 0},
     BiasKind::kOutOfRange},
    {{"T0.8+topp0.9+mixed", 0.8f, 0, 0.9f, 0.0f, false, 8, SamplingMode::kSample, 0},
     BiasKind::kMixed},
    {{"T1.2+topk200+pen+ban", 1.2f, 200, 1.0f, 0.0f, true, 8, SamplingMode::kSample, 4},
     BiasKind::kBan},
    {{"T0.7+minp0.05+boost", 0.7f, 0, 1.0f, 0.05f, false, 8, SamplingMode::kSample, 0},
     BiasKind::kBoost},
    {{"T1+pen+mixed", 1.0f, 0, 1.0f, 0.0f, true, 8, SamplingMode::kSample, 0}, BiasKind::kMixed},
    {{"lp_only+mixed", 1.0f, 0, 1.0f, 0.0f, false, 0, SamplingMode::kSample, 7},
     BiasKind::kMixed},
    {{"beam4+boost", 0.7f, 0, 1.0f, 0.0f, false, 4, SamplingMode::kBeam, 0}, BiasKind::kBoost},
    {{"beam8+pen+mixed", 1.0f, 0, 1.0f, 0.0f, true, 8, SamplingMode::kBeam, 0},
     BiasKind::kMixed},
    {{"beam8+ban", 1.0f, 0, 1.0f, 0.0f, false, 8, SamplingMode::kBeam, 0}, BiasKind::kBan},
    {{"beam100+pen+mixed", 1.0f, 0, 1.0f, 0.0f, true, 100, SamplingMode::kBeam, 0},
     BiasKind::kMixed},
    {{"beam100+oob", 1.0f, 0, 1.0f, 0.0f, false, 100, SamplingMode::kBeam, 0},
     BiasKind::kOutOfRange},
    {{"greedy+allowed+lp3", 0.0f, 0, 1.0f, 0.0f, false, 1, SamplingMode::kSample, 3},
     BiasKind::kAllowed},
    {{"greedy+pen+allowed", 0.0f, 0, 1.0f, 0.0f, true, 1, SamplingMode::kSample, 0},
     BiasKind::kAllowed},
    {{"T1+topk40+allowed", 1.0f, 40, 1.0f, 0.0f, false, 8, SamplingMode::kSample, 0},
     BiasKind::kAllowed},
    {{"T0.8+topp0.9+pen+allowed", 0.8f, 0, 0.9f, 0.0f, true, 8, SamplingMode::kSample, 0},
     BiasKind::kAllowed},
    {{"beam8+allowed", 1.0f, 0, 1.0f, 0.0f, false, 8, SamplingMode::kBeam, 0},
     BiasKind::kAllowed},
};

// |got - want|, 0 when equal (also both -inf: masked tokens), NaN stays NaN.
double LogprobErr(float got, float want);

// Compares ranked lists (top-N or beam): same length, same ids except where
// the CPU's values of the two ids tie within 1e-6, log-probs within 1e-4.
void CompareList(const std::vector<ScoredToken>& want, const std::vector<ScoredToken>& got,
                 const std::vector<float>& values, Tally* t);

// A row's GPU result against the CPU's (samples or beam candidates, top
// list, log-probs of the raw or processed distribution) into *t.
void CompareRow(const Row& row, const RowResult& want, const RowResult& got, Tally* t);

// Logits: normal, optionally rounded to a coarse grid so that many tie, and
// with a few planted ties at the top.
std::vector<float> MakeLogits(int32_t vocab, bool coarse, std::mt19937& rng);

// A token history of `len` ids with repeats and a few ids outside the
// vocabulary (which the penalties ignore).
std::vector<int32_t> MakeHistory(int32_t vocab, int32_t len, std::mt19937& rng);

// Distinct-token biases (ids outside [0, vocab) distinct too) for `logits`:
//  kBan: -inf on every raw maximum and 3 random tokens (greedy moves);
//  kBoost: a token u lifted 2 above the maximum, the maxima lowered by 1.5,
//    and where one is found a token whose biased logit ties u's exactly in
//    float (lowest id wins on both devices only if both round alike);
//  kMixed: min(vocab / 4, 2000) random biases in [-8, 8] (one in ten -inf),
//    -inf on the raw maxima, +3 on masked (-inf) tokens, +0 on -0 tokens,
//    and ids outside the vocabulary, shuffled;
//  kOutOfRange: only ids outside the vocabulary (the row samples as raw);
//  kAllowed: allowed_only over min(vocab / 2, 40) tokens, ascending, without
//    the raw maxima, a third of them biased in [-2, 2] and one banned.
std::vector<LogitBias> MakeBiases(BiasKind kind, const std::vector<float>& logits,
                                  std::mt19937& rng);

// A row of combo `c` on fresh logits, with a history whose best token was
// generated twice (so the penalties bite), keys from `seed`, and `biases`.
Row MakeRow(const Combo& c, int32_t vocab, bool coarse, uint64_t seed, std::mt19937& rng,
            BiasKind biases = BiasKind::kNone);

// Whether a greedy row's biases should keep it off the raw argmax (bans and
// boosts without penalties always do; with penalties, bans do).
bool BiasMustMoveGreedy(const Row& row);


}  // namespace folio::kernels::sampling_check

#endif  // FOLIO_TESTS_GPU_SAMPLING_GPU_ROWS_H_
