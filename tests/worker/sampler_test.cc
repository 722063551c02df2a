// The worker's Sampler: greedy, raw log-probs, temperature / top-k / top-p /
// min-p support and frequencies, penalties, seeded determinism and beam
// candidates. Statistical checks use fixed seed lists, so they are
// deterministic: a pass is a pass forever.

#include "worker/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/threads.h"

namespace folio {
namespace {

constexpr uint64_t kSeeds[] = {11, 23, 37, 41, 53, 67, 79, 83};

// Raw log-softmax in double: the oracle for reported log-probs.
std::vector<double> RefLogSoftmax(const std::vector<float>& logits) {
  const double max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float x : logits) sum += std::exp(x - max);
  std::vector<double> out;
  for (float x : logits) out.push_back(x - max - std::log(sum));
  return out;
}

// The distribution sampling should draw from (no penalties): candidates by
// logit (ties: lower id first), top-k, softmax at T, top-p (smallest prefix
// reaching p), min-p (relative to the most likely), renormalized. Zero
// outside the support.
std::vector<double> RefDistribution(const std::vector<float>& logits, const SamplingParams& p) {
  const int vocab = static_cast<int>(logits.size());
  std::vector<int> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  int keep = (p.top_k > 0 && p.top_k < vocab) ? p.top_k : vocab;
  std::vector<double> probs(keep);
  double sum = 0.0;
  for (int i = 0; i < keep; ++i) {
    probs[i] = std::exp((logits[order[i]] - logits[order[0]]) / p.temperature);
    sum += probs[i];
  }
  for (double& x : probs) x /= sum;
  if (p.top_p < 1.0f) {
    double mass = 0.0;
    int n = 0;
    while (n < keep && mass < p.top_p) mass += probs[n++];
    keep = std::max(1, n);
  }
  if (p.min_p > 0.0f) {
    int n = 1;
    while (n < keep && probs[n] >= p.min_p * probs[0]) ++n;
    keep = n;
  }
  double total = 0.0;
  for (int i = 0; i < keep; ++i) total += probs[i];
  std::vector<double> dist(vocab, 0.0);
  for (int i = 0; i < keep; ++i) dist[order[i]] = probs[i] / total;
  return dist;
}

// Logits whose softmax at T = 1 is `probs`.
std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

// Probabilities spread over ids in a shuffled order, so sorting matters.
// By rank: .35 .25 .15 .10 .08 .04 .02 .01 (cumulative .35 .60 .75 .85 .93 ...).
std::vector<float> ShuffledLogits() {
  const double by_rank[] = {0.35, 0.25, 0.15, 0.10, 0.08, 0.04, 0.02, 0.01};
  const int id_of_rank[] = {5, 2, 7, 0, 3, 6, 1, 4};
  std::vector<double> probs(8);
  for (int r = 0; r < 8; ++r) probs[id_of_rank[r]] = by_rank[r];
  return LogitsOf(probs);
}

SamplingRequest MakeRequest(const std::vector<float>& logits, const SamplingParams& params,
                            std::span<const TokenId> prompt = {},
                            std::span<const TokenId> output = {}) {
  SamplingRequest r;
  r.logits = logits;
  r.params = &params;
  r.prompt_tokens = prompt;
  r.output_tokens = output;
  return r;
}

// Draws `per_seed` samples for each seed of kSeeds; checks every reported
// log-prob is the raw one; returns counts per token.
std::vector<int> Histogram(const std::vector<float>& logits, SamplingParams params, int per_seed) {
  Sampler sampler(/*default_seed=*/0);
  const std::vector<double> raw = RefLogSoftmax(logits);
  std::vector<int> counts(logits.size(), 0);
  for (uint64_t seed : kSeeds) {
    params.seed = seed;
    SamplingRequest r = MakeRequest(logits, params);
    r.num_samples = per_seed;
    const std::vector<SampledToken> out = sampler.Sample(r);
    EXPECT_EQ(out.size(), static_cast<size_t>(per_seed));
    for (const SampledToken& t : out) {
      EXPECT_GE(t.token_id, 0);
      EXPECT_LT(t.token_id, static_cast<TokenId>(logits.size()));
      EXPECT_NEAR(t.logprob, raw[t.token_id], 1e-5);
      ++counts[t.token_id];
    }
  }
  return counts;
}

// Every drawn token lies in the support of `expected`, and each frequency is
// within 5 binomial standard deviations (plus a little slack) of it.
void ExpectFollows(const std::vector<int>& counts, const std::vector<double>& expected) {
  const double n = std::accumulate(counts.begin(), counts.end(), 0.0);
  for (size_t t = 0; t < counts.size(); ++t) {
    if (expected[t] == 0.0) {
      EXPECT_EQ(counts[t], 0) << "token " << t << " is outside the allowed set";
      continue;
    }
    const double freq = counts[t] / n;
    const double sd = std::sqrt(expected[t] * (1.0 - expected[t]) / n);
    EXPECT_NEAR(freq, expected[t], 5.0 * sd + 0.002) << "token " << t;
  }
}

std::set<TokenId> Support(const std::vector<double>& dist) {
  std::set<TokenId> s;
  for (size_t t = 0; t < dist.size(); ++t) {
    if (dist[t] > 0.0) s.insert(static_cast<TokenId>(t));
  }
  return s;
}

TEST(LogSoftmaxTest, MatchesDoubleAndIsStableForLargeLogits) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 5.0f);
  std::vector<float> logits(2048);
  for (float& x : logits) x = normal(rng);
  std::vector<float> out(logits.size());
  LogSoftmax(logits, out);
  const std::vector<double> ref = RefLogSoftmax(logits);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], ref[i], 1e-5) << i;
  // Huge logits neither overflow nor lose the distribution (float spacing
  // near 1000 is 6e-5, hence the looser bound).
  const std::vector<float> huge = {1000.0f, 999.0f, 998.0f, -1000.0f};
  std::vector<float> huge_out(huge.size());
  LogSoftmax(huge, huge_out);
  const std::vector<double> huge_ref = RefLogSoftmax(huge);
  double mass = 0.0;
  for (size_t i = 0; i < huge.size(); ++i) {
    ASSERT_FALSE(std::isnan(huge_out[i]));
    if (i < 3) {
      EXPECT_NEAR(huge_out[i], huge_ref[i], 1e-4);
    }
    mass += std::exp(static_cast<double>(huge_out[i]));
  }
  EXPECT_NEAR(mass, 1.0, 1e-4);
}

TEST(SamplerTest, GreedyIsArgmaxWithLowestIdOnTiesAndRawLogprob) {
  Sampler sampler(0);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> logits(500);
    for (float& x : logits) x = normal(rng);
    const TokenId best = static_cast<TokenId>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    const std::vector<SampledToken> out = sampler.Sample(MakeRequest(logits, greedy));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].token_id, best);
    EXPECT_NEAR(out[0].logprob, RefLogSoftmax(logits)[best], 1e-5);
  }
  const std::vector<float> tied = {1.0f, 3.0f, 0.5f, 3.0f, 3.0f};
  EXPECT_EQ(sampler.Sample(MakeRequest(tied, greedy))[0].token_id, 1);
  // Greedy ignores seeds and top-k/top-p.
  greedy.seed = 99;
  greedy.top_k = 2;
  greedy.top_p = 0.3f;
  EXPECT_EQ(sampler.Sample(MakeRequest(tied, greedy))[0].token_id, 1);
}

TEST(SamplerTest, LogprobsAreRawEvenWhenSamplingIsShaped) {
  const std::vector<float> logits = ShuffledLogits();
  SamplingParams p;
  p.temperature = 0.3f;
  p.top_k = 3;
  p.repetition_penalty = 1.5f;
  p.frequency_penalty = 0.5f;
  const std::vector<TokenId> prompt = {5, 2}, output = {7, 7};
  Sampler sampler(0);
  const std::vector<double> raw = RefLogSoftmax(logits);
  for (uint64_t seed : kSeeds) {
    p.seed = seed;
    SamplingRequest r = MakeRequest(logits, p, prompt, output);
    r.num_samples = 16;
    for (const SampledToken& t : sampler.Sample(r)) EXPECT_NEAR(t.logprob, raw[t.token_id], 1e-5);
  }
}

TEST(SamplerTest, TemperatureOneFollowsSoftmax) {
  const std::vector<float> logits = ShuffledLogits();
  SamplingParams p;
  ExpectFollows(Histogram(logits, p, 1000), RefDistribution(logits, p));
}

TEST(SamplerTest, TemperatureSharpensAndFlattens) {
  const std::vector<float> logits = ShuffledLogits();
  for (float t : {0.5f, 2.0f}) {
    SCOPED_TRACE(t);
    SamplingParams p;
    p.temperature = t;
    const std::vector<double> expected = RefDistribution(logits, p);
    // The oracle itself: p^(1/T), renormalized.
    const std::vector<double> base = RefDistribution(logits, SamplingParams{});
    double z = 0.0;
    for (double b : base) z += std::pow(b, 1.0 / t);
    for (size_t i = 0; i < base.size(); ++i) ASSERT_NEAR(expected[i], std::pow(base[i], 1.0 / t) / z, 1e-6);
    ExpectFollows(Histogram(logits, p, 1000), expected);
  }
}

TEST(SamplerTest, TopKKeepsTheKMostLikely) {
  const std::vector<float> logits = ShuffledLogits();
  SamplingParams p;
  p.top_k = 3;
  const std::vector<double> expected = RefDistribution(logits, p);
  EXPECT_EQ(Support(expected), (std::set<TokenId>{5, 2, 7}));
  ExpectFollows(Histogram(logits, p, 500), expected);
  p.top_k = 1;  // top-k 1 is greedy
  const std::vector<int> counts = Histogram(logits, p, 50);
  EXPECT_EQ(counts[5], 50 * static_cast<int>(std::size(kSeeds)));
}

TEST(SamplerTest, TopPKeepsTheSmallestPrefixReachingP) {
  const std::vector<float> logits = ShuffledLogits();
  SamplingParams p;
  p.top_p = 0.5f;  // .35 < .5 <= .60
  EXPECT_EQ(Support(RefDistribution(logits, p)), (std::set<TokenId>{5, 2}));
  ExpectFollows(Histogram(logits, p, 500), RefDistribution(logits, p));
  p.top_p = 0.8f;  // .75 < .8 <= .85
  EXPECT_EQ(Support(RefDistribution(logits, p)), (std::set<TokenId>{5, 2, 7, 0}));
  ExpectFollows(Histogram(logits, p, 500), RefDistribution(logits, p));
  p.top_p = 0.1f;  // below the first token: that token alone
  const std::vector<int> counts = Histogram(logits, p, 50);
  EXPECT_EQ(counts[5], 50 * static_cast<int>(std::size(kSeeds)));
}

TEST(SamplerTest, MinPDropsTokensBelowAFractionOfTheBest) {
  const std::vector<float> logits = ShuffledLogits();
  SamplingParams p;
  p.min_p = 0.3f;  // floor .105: keeps .35 .25 .15, drops .10
  EXPECT_EQ(Support(RefDistribution(logits, p)), (std::set<TokenId>{5, 2, 7}));
  ExpectFollows(Histogram(logits, p, 500), RefDistribution(logits, p));
}

TEST(SamplerTest, CombinedFiltersOnARandomVocabulary) {
  std::mt19937 rng(2024);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(1000);
  for (float& x : logits) x = normal(rng);
  struct Combo {
    float temperature, top_p, min_p;
    int32_t top_k;
  };
  for (const Combo& c : {Combo{0.8f, 0.9f, 0.0f, 0}, Combo{1.0f, 1.0f, 0.0f, 20},
                         Combo{1.5f, 0.7f, 0.0f, 50}, Combo{0.7f, 1.0f, 0.1f, 0},
                         Combo{1.2f, 0.95f, 0.05f, 100}}) {
    SCOPED_TRACE(::testing::Message() << "T=" << c.temperature << " top_p=" << c.top_p
                                      << " min_p=" << c.min_p << " top_k=" << c.top_k);
    SamplingParams p;
    p.temperature = c.temperature;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    p.top_k = c.top_k;
    const std::vector<double> expected = RefDistribution(logits, p);
    const std::vector<int> counts = Histogram(logits, p, 400);
    for (size_t t = 0; t < counts.size(); ++t) {
      if (expected[t] == 0.0) {
        EXPECT_EQ(counts[t], 0) << "token " << t << " is outside the allowed set";
      }
    }
    // Frequencies of the most likely tokens (the rest are too rare to bound usefully).
    std::vector<double> top = expected;
    std::sort(top.rbegin(), top.rend());
    const double n = std::accumulate(counts.begin(), counts.end(), 0.0);
    for (size_t t = 0; t < counts.size(); ++t) {
      if (expected[t] < top[std::min<size_t>(4, top.size() - 1)]) continue;
      const double sd = std::sqrt(expected[t] * (1 - expected[t]) / n);
      EXPECT_NEAR(counts[t] / n, expected[t], 5 * sd + 0.002) << "token " << t;
    }
  }
}

TEST(SamplerTest, RepetitionPenaltyCoversPromptAndOutput) {
  Sampler sampler(0);
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 1.2f;
  const std::vector<float> positive = {2.0f, 1.9f, 0.0f};  // 2.0 / 1.2 = 1.67 < 1.9
  const std::vector<float> negative = {-1.0f, -1.1f, -5.0f};  // -1.0 * 1.2 = -1.2 < -1.1
  const std::vector<TokenId> seen = {0}, none = {};
  EXPECT_EQ(sampler.Sample(MakeRequest(positive, p, none, none))[0].token_id, 0);
  EXPECT_EQ(sampler.Sample(MakeRequest(positive, p, seen, none))[0].token_id, 1);
  EXPECT_EQ(sampler.Sample(MakeRequest(positive, p, none, seen))[0].token_id, 1);
  EXPECT_EQ(sampler.Sample(MakeRequest(negative, p, seen, none))[0].token_id, 1);
  // Seen many times, penalized once.
  const std::vector<TokenId> many = {0, 0, 0, 0};
  const std::vector<float> close = {2.0f, 1.5f, 0.0f};  // 2.0 / 1.2 = 1.67 > 1.5
  EXPECT_EQ(sampler.Sample(MakeRequest(close, p, many, many))[0].token_id, 0);
  // The reported log-prob stays raw.
  EXPECT_NEAR(sampler.Sample(MakeRequest(positive, p, seen, none))[0].logprob,
              RefLogSoftmax(positive)[1], 1e-5);
}

TEST(SamplerTest, PresenceAndFrequencyPenaltiesCoverOutputOnly) {
  Sampler sampler(0);
  const std::vector<float> logits = {2.0f, 1.8f, 0.0f};
  const std::vector<TokenId> none = {}, zero_once = {0}, zero_thrice = {0, 0, 0}, one_once = {1};
  SamplingParams presence;
  presence.temperature = 0.0f;
  presence.presence_penalty = 0.5f;
  EXPECT_EQ(sampler.Sample(MakeRequest(logits, presence, zero_thrice, none))[0].token_id, 0);
  EXPECT_EQ(sampler.Sample(MakeRequest(logits, presence, none, zero_once))[0].token_id, 1);
  // Negative presence encourages repeats.
  presence.presence_penalty = -0.5f;
  EXPECT_EQ(sampler.Sample(MakeRequest(logits, presence, none, one_once))[0].token_id, 1);

  SamplingParams frequency;
  frequency.temperature = 0.0f;
  frequency.frequency_penalty = 0.1f;  // 2.0 - 0.1 * count vs 1.8
  EXPECT_EQ(sampler.Sample(MakeRequest(logits, frequency, zero_thrice, none))[0].token_id, 0);
  EXPECT_EQ(sampler.Sample(MakeRequest(logits, frequency, none, zero_once))[0].token_id, 0);
  EXPECT_EQ(sampler.Sample(MakeRequest(logits, frequency, none, zero_thrice))[0].token_id, 1);
}

// Uniform logits over 256 tokens: any key change should move the draw.
class SeedTest : public ::testing::Test {
 protected:
  TokenId Draw(Sampler& s, std::optional<uint64_t> seed, RequestId request, int32_t index,
               int32_t position, int32_t sample_index) {
    SamplingParams p;
    p.seed = seed;
    const std::vector<TokenId> output(position, 3);
    SamplingRequest r = MakeRequest(logits_, p, {}, output);
    r.request_id = request;
    r.sequence_index = index;
    r.num_samples = sample_index + 1;
    return s.Sample(r)[sample_index].token_id;
  }
  std::vector<float> logits_ = std::vector<float>(256, 0.0f);
};

TEST_F(SeedTest, SameKeySameTokenAcrossSamplersAndInterleaving) {
  Sampler a(0), b(0);
  for (int32_t pos = 0; pos < 12; ++pos) {
    const TokenId first = Draw(a, 42, 7, 1, pos, 2);
    Draw(a, 5, 3, 0, pos + 1, 0);  // unrelated work in between
    EXPECT_EQ(Draw(a, 42, 7, 1, pos, 2), first);
    EXPECT_EQ(Draw(b, 42, 7, 1, pos, 2), first);
  }
  // Unseeded requests are reproducible under the same default seed.
  Sampler c(1234), d(1234);
  EXPECT_EQ(Draw(c, std::nullopt, 9, 0, 4, 0), Draw(d, std::nullopt, 9, 0, 4, 0));
}

TEST_F(SeedTest, EveryKeyPartVariesTheDraw) {
  Sampler s(0);
  auto distinct = [](auto draw) {
    std::set<TokenId> seen;
    for (int32_t v = 0; v < 16; ++v) seen.insert(draw(v));
    return seen.size();
  };
  // With 256 equally likely tokens, 16 draws ignoring the varied part would
  // all be the same token.
  EXPECT_GE(distinct([&](int32_t v) { return Draw(s, 1000 + v, 0, 0, 0, 0); }), 8u);
  EXPECT_GE(distinct([&](int32_t v) { return Draw(s, 42, 0, v, 0, 0); }), 8u);
  EXPECT_GE(distinct([&](int32_t v) { return Draw(s, 42, 0, 0, v, 0); }), 8u);
  EXPECT_GE(distinct([&](int32_t v) { return Draw(s, 42, 0, 0, 0, v); }), 8u);
  // Unseeded requests share the default seed, so they vary by request.
  EXPECT_GE(distinct([&](int32_t v) { return Draw(s, std::nullopt, v, 0, 0, 0); }), 8u);
  EXPECT_GE(distinct([&](int32_t v) {
              Sampler other(static_cast<uint64_t>(v) + 1);
              return Draw(other, std::nullopt, 5, 0, 0, 0);
            }),
            8u);
}

TEST_F(SeedTest, ARequestSeedReproducesAcrossRequestIds) {
  // Same seed and prompt, same tokens, whatever id the engine gave the
  // request (vLLM / OpenAI semantics): a resubmitted request repeats itself.
  Sampler s(0);
  for (int32_t pos = 0; pos < 8; ++pos) {
    const TokenId t = Draw(s, 42, 0, 0, pos, 0);
    EXPECT_EQ(Draw(s, 42, 1, 0, pos, 0), t);
    EXPECT_EQ(Draw(s, 42, 987654321, 0, pos, 0), t);
  }
}

TEST(SamplerTest, BeamCandidatesAreTopNDistinctBestFirst) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(300);
  for (float& x : logits) x = normal(rng);
  logits[17] = logits[250] = 9.0f;  // a tie at the top: lower id first
  Sampler sampler(0);
  SamplingParams p;
  p.temperature = 0.7f;  // beam search ranks by the model distribution, not T
  SamplingRequest r = MakeRequest(logits, p);
  r.mode = SampleMode::kBeamCandidates;
  r.num_samples = 8;
  const std::vector<SampledToken> out = sampler.Sample(r);
  ASSERT_EQ(out.size(), 8u);
  std::vector<int> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  const std::vector<double> raw = RefLogSoftmax(logits);
  std::set<TokenId> distinct;
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(out[i].token_id, order[i]) << i;
    EXPECT_NEAR(out[i].logprob, raw[order[i]], 1e-5);
    distinct.insert(out[i].token_id);
    if (i > 0) {
      EXPECT_GE(out[i - 1].logprob, out[i].logprob);
    }
  }
  EXPECT_EQ(distinct.size(), 8u);
  EXPECT_EQ(out[0].token_id, 17);
  EXPECT_EQ(out[1].token_id, 250);

  // More candidates than the vocabulary: all of it, once each.
  const std::vector<float> small = {0.1f, 0.3f, 0.2f};
  SamplingRequest all = MakeRequest(small, p);
  all.mode = SampleMode::kBeamCandidates;
  all.num_samples = 6;
  const std::vector<SampledToken> three = sampler.Sample(all);
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(three[0].token_id, 1);
  EXPECT_EQ(three[1].token_id, 2);
  EXPECT_EQ(three[2].token_id, 0);
}

TEST(SamplerTest, LogitBiasShiftsGreedyAndDrawsButNotLogprobs) {
  Sampler sampler(0);
  const std::vector<float> logits = {2.0f, 1.0f, 0.5f, 0.0f};
  SamplingParams p;
  p.temperature = 0.0f;
  p.logit_bias = {{1, 1.5f}};  // 1.0 + 1.5 = 2.5 > 2.0
  std::vector<SampledToken> out = sampler.Sample(MakeRequest(logits, p));
  EXPECT_EQ(out[0].token_id, 1);
  EXPECT_NEAR(out[0].logprob, RefLogSoftmax(logits)[1], 1e-5);  // the model's, unbiased
  p.logit_bias = {{0, -100.0f}, {3, 1.9f}};  // 0 -> -98, 3 -> 1.9
  EXPECT_EQ(sampler.Sample(MakeRequest(logits, p))[0].token_id, 3);
  // Out-of-vocabulary ids are ignored.
  p.logit_bias = {{99, 50.0f}};
  EXPECT_EQ(sampler.Sample(MakeRequest(logits, p))[0].token_id, 0);

  // Draws follow the biased distribution: bias ln(3) triples token 2's odds.
  SamplingParams draw;
  draw.logit_bias = {{2, static_cast<float>(std::log(3.0))}};
  std::vector<float> biased = ShuffledLogits();
  biased[2] += static_cast<float>(std::log(3.0));
  ExpectFollows(Histogram(ShuffledLogits(), draw, 4000), RefDistribution(biased, SamplingParams()));
}

TEST(SamplerTest, LogitBiasComesBeforeTheRepetitionPenalty) {
  Sampler sampler(0);
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 2.0f;
  p.logit_bias = {{0, 1.0f}};
  const std::vector<TokenId> seen = {0};
  // Bias first: (1 + 1) / 2 = 1.0 < 1.2; penalty first would give 0.5 + 1 = 1.5 > 1.2.
  const std::vector<float> logits = {1.0f, 1.2f};
  EXPECT_EQ(sampler.Sample(MakeRequest(logits, p, seen))[0].token_id, 1);
}

TEST(SamplerTest, MinTokensBansEndTokensUntilEnoughAreOut) {
  Sampler sampler(0);
  SamplingParams p;
  p.temperature = 0.0f;
  p.min_tokens = 2;
  p.end_token_ids = {0, 2};
  p.logit_bias = {{0, 5.0f}};  // a ban outweighs a bias on the same token
  const std::vector<float> logits = {3.0f, 1.0f, 2.0f, 0.5f};
  const std::vector<TokenId> none = {}, one = {1}, two = {1, 1};
  EXPECT_EQ(sampler.Sample(MakeRequest(logits, p, none, none))[0].token_id, 1);
  EXPECT_EQ(sampler.Sample(MakeRequest(logits, p, none, one))[0].token_id, 1);
  EXPECT_EQ(sampler.Sample(MakeRequest(logits, p, none, two))[0].token_id, 0);  // allowed again
  // Draws never pick a banned token, whatever the seed.
  p.temperature = 1.0f;
  for (uint64_t seed : kSeeds) {
    p.seed = seed;
    SamplingRequest r = MakeRequest(logits, p, none, one);
    r.num_samples = 64;
    for (const SampledToken& t : sampler.Sample(r)) {
      EXPECT_NE(t.token_id, 0);
      EXPECT_NE(t.token_id, 2);
    }
  }
  // Beam candidates rank banned tokens last, at -inf.
  SamplingRequest beam = MakeRequest(logits, p, none, none);
  beam.mode = SampleMode::kBeamCandidates;
  beam.num_samples = 4;
  const std::vector<SampledToken> out = sampler.Sample(beam);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].token_id, 1);
  EXPECT_EQ(out[1].token_id, 3);
  EXPECT_TRUE(std::isinf(out[2].logprob) && out[2].logprob < 0);
}

TEST(SamplerTest, AllowedTokenIdsRestrictEveryPickButNotLogprobs) {
  Sampler sampler(0);
  const std::vector<float> logits = {3.0f, 1.0f, 2.0f, 0.5f, 2.5f};
  SamplingParams p;
  p.temperature = 0.0f;
  p.allowed_token_ids = {1, 3};
  std::vector<SampledToken> out = sampler.Sample(MakeRequest(logits, p));
  EXPECT_EQ(out[0].token_id, 1);
  EXPECT_NEAR(out[0].logprob, RefLogSoftmax(logits)[1], 1e-5);  // the model's
  // logit_bias still applies to the allowed tokens, and only to them.
  p.logit_bias = {{0, 100.0f}, {3, 1.0f}};
  EXPECT_EQ(sampler.Sample(MakeRequest(logits, p))[0].token_id, 3);
  // min_tokens' bans reach inside the allowed set.
  p.logit_bias.clear();
  p.min_tokens = 1;
  p.end_token_ids = {1};
  const std::vector<TokenId> none = {};
  EXPECT_EQ(sampler.Sample(MakeRequest(logits, p, none, none))[0].token_id, 3);
  // Draws stay inside the set, whatever the seed.
  p = SamplingParams();
  p.allowed_token_ids = {2, 4};
  for (uint64_t seed : kSeeds) {
    p.seed = seed;
    SamplingRequest r = MakeRequest(logits, p);
    r.num_samples = 64;
    for (const SampledToken& t : sampler.Sample(r)) {
      EXPECT_TRUE(t.token_id == 2 || t.token_id == 4) << t.token_id;
    }
  }
  // Beam candidates: the allowed first, the rest at -inf.
  SamplingRequest beam = MakeRequest(logits, p);
  beam.mode = SampleMode::kBeamCandidates;
  beam.num_samples = 3;
  out = sampler.Sample(beam);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].token_id, 4);
  EXPECT_EQ(out[1].token_id, 2);
  EXPECT_TRUE(std::isinf(out[2].logprob) && out[2].logprob < 0);
}

TEST(SamplerTest, BadWordsBanTheirNextTokenAfterTheirPrefix) {
  Sampler sampler(0);
  const std::vector<float> logits = {3.0f, 1.0f, 2.0f, 0.5f};
  SamplingParams p;
  p.temperature = 0.0f;
  p.bad_words_token_ids = {{0}, {1, 2}, {3, 1, 2}};
  const std::vector<TokenId> none = {}, after1 = {3, 1}, after3 = {2, 3};
  // A one-token word is always banned: the best is then 2.
  EXPECT_EQ(sampler.Sample(MakeRequest(logits, p, none, none))[0].token_id, 2);
  // After 1, the word [1, 2] bans 2 (and [3, 1, 2] too): 1 is next.
  EXPECT_EQ(sampler.Sample(MakeRequest(logits, p, none, after1))[0].token_id, 1);
  // After 3 nothing of [1, 2] matches: 2 again.
  EXPECT_EQ(sampler.Sample(MakeRequest(logits, p, none, after3))[0].token_id, 2);
  // The prompt is not the output: a prompt ending in 1 bans nothing.
  const std::vector<TokenId> prompt1 = {1};
  EXPECT_EQ(sampler.Sample(MakeRequest(logits, p, prompt1, none))[0].token_id, 2);
}

TEST(SamplerTest, BeamCandidatesRankByThePenalizedDistribution) {
  Sampler sampler(0);
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  const std::vector<float> logits = {3.0f, 2.0f, 1.0f};  // token 0 seen: 1.5
  const std::vector<TokenId> prompt = {0};
  SamplingRequest r = MakeRequest(logits, p, prompt);
  r.mode = SampleMode::kBeamCandidates;
  r.num_samples = 3;
  const std::vector<SampledToken> out = sampler.Sample(r);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].token_id, 1);
  EXPECT_EQ(out[1].token_id, 0);
  EXPECT_EQ(out[2].token_id, 2);
  const std::vector<double> penalized = RefLogSoftmax({1.5f, 2.0f, 1.0f});
  EXPECT_NEAR(out[0].logprob, penalized[1], 1e-5);
  EXPECT_NEAR(out[1].logprob, penalized[0], 1e-5);
}

}  // namespace
// Top-N log-probs: length N (capped at the vocabulary), best first with
// lower ids first on ties, values of the raw log-softmax, the greedy token
// first; shared by every sample of a call; absent unless asked for.
TEST(SamplerTest, TopLogprobsAreTheNBestOfTheRawDistribution) {
  std::mt19937 rng(13);
  std::normal_distribution<float> normal(0.0f, 2.5f);
  Sampler sampler(0);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> logits(700);
    for (float& x : logits) x = normal(rng);
    if (trial == 0) logits[301] = logits[44] = 11.0f;  // tie at the top
    const std::vector<double> raw = RefLogSoftmax(logits);
    std::vector<int> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return raw[a] > raw[b]; });
    const int32_t n = 1 + trial % 7;
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    greedy.logprobs = n;
    greedy.repetition_penalty = 1.3f;  // shapes sampling, never the reported log-probs
    const std::vector<TokenId> prompt = {order[0], 3};
    const std::vector<SampledToken> out = sampler.Sample(MakeRequest(logits, greedy, prompt));
    ASSERT_EQ(out.size(), 1u);
    const std::vector<TokenLogprob>& top = out[0].top_logprobs;
    ASSERT_EQ(top.size(), static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(top[i].token_id, order[i]) << "trial " << trial << " rank " << i;
      EXPECT_NEAR(top[i].logprob, raw[order[i]], 1e-5);
      if (i > 0) {
        EXPECT_GE(top[i - 1].logprob, top[i].logprob);
      }
    }
    // The chosen greedy token is in the list with the same log-prob.
    const TokenId chosen = out[0].token_id;
    const auto hit = std::find_if(top.begin(), top.end(),
                                  [&](const TokenLogprob& t) { return t.token_id == chosen; });
    if (greedy.repetition_penalty == 1.0f || chosen == order[0]) {
      ASSERT_NE(hit, top.end());
      EXPECT_FLOAT_EQ(hit->logprob, out[0].logprob);
    }
    if (trial == 0) {
      EXPECT_EQ(top[0].token_id, 44);
      if (n > 1) {
        EXPECT_EQ(top[1].token_id, 301);
      }
    }
    // Plain greedy: the chosen token is the first entry.
    greedy.repetition_penalty = 1.0f;
    const std::vector<SampledToken> plain = sampler.Sample(MakeRequest(logits, greedy));
    ASSERT_FALSE(plain[0].top_logprobs.empty());
    EXPECT_EQ(plain[0].top_logprobs[0].token_id, plain[0].token_id);
    EXPECT_FLOAT_EQ(plain[0].top_logprobs[0].logprob, plain[0].logprob);
  }
  // Sampled: every sample carries the same list; none when not asked for.
  const std::vector<float> logits = ShuffledLogits();
  SamplingParams p;
  p.temperature = 0.8f;
  p.seed = 5;
  p.logprobs = 5;
  SamplingRequest r = MakeRequest(logits, p);
  r.num_samples = 4;
  const std::vector<SampledToken> four = sampler.Sample(r);
  ASSERT_EQ(four.size(), 4u);
  for (const SampledToken& t : four) {
    ASSERT_EQ(t.top_logprobs.size(), 5u);
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(t.top_logprobs[i].token_id, four[0].top_logprobs[i].token_id);
    }
  }
  p.logprobs = 0;
  EXPECT_TRUE(sampler.Sample(MakeRequest(logits, p))[0].top_logprobs.empty());
  // More than the vocabulary: all of it.
  const std::vector<float> small = {0.1f, 0.3f, 0.2f};
  p.logprobs = 10;
  const std::vector<SampledToken> three = sampler.Sample(MakeRequest(small, p));
  ASSERT_EQ(three[0].top_logprobs.size(), 3u);
  EXPECT_EQ(three[0].top_logprobs[0].token_id, 1);
  EXPECT_EQ(three[0].top_logprobs[1].token_id, 2);
  EXPECT_EQ(three[0].top_logprobs[2].token_id, 0);
}

// A batch sampled over two threads gives every row the tokens, log-probs and
// alternatives one Sampler gives it alone: greedy, seeded and unseeded
// draws, top-k / top-p, penalties, several samples, beam candidates.
TEST(BatchSamplerTest, RowsSampledInParallelEqualRowsSampledAlone) {
  constexpr int kRows = 96, kVocab = 2048;
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<std::vector<float>> logits(kRows, std::vector<float>(kVocab));
  for (auto& row : logits) {
    for (float& x : row) x = normal(gen);
  }
  const std::vector<TokenId> prompt = {3, 9, 27, 81};
  const std::vector<TokenId> output = {5, 25, 125, 625};
  std::vector<SamplingParams> params(kRows);
  std::vector<SamplingRequest> rows;
  for (int i = 0; i < kRows; ++i) {
    SamplingParams& p = params[i];
    p.temperature = i % 4 == 0 ? 0.0f : 0.7f + 0.1f * (i % 3);
    if (i % 3 == 0) p.seed = 1000 + i;
    if (i % 5 == 1) p.top_k = 40;
    if (i % 7 == 2) p.top_p = 0.9f;
    if (i % 6 == 3) p.repetition_penalty = 1.3f;
    if (i % 8 == 5) p.logprobs = 3;
    SamplingRequest r = MakeRequest(logits[i], p, prompt, output);
    r.request_id = i;
    r.sequence_index = i % 2;
    if (i % 11 == 4) r.num_samples = 3;
    if (i % 13 == 6) {
      r.mode = SampleMode::kBeamCandidates;
      r.num_samples = 4;
    }
    rows.push_back(r);
  }
  kernels::cpu::SetKernelThreads(2);
  BatchSampler batch(/*default_seed=*/42);
  std::vector<std::vector<SampledToken>> got;
  for (int round = 0; round < 2; ++round) {  // the second reuses the samplers
    batch.SampleRows(rows, &got);
    ASSERT_EQ(got.size(), rows.size());
    Sampler alone(/*default_seed=*/42);
    for (int i = 0; i < kRows; ++i) {
      const std::vector<SampledToken> want = alone.Sample(rows[i]);
      ASSERT_EQ(got[i].size(), want.size()) << "row " << i;
      for (size_t j = 0; j < want.size(); ++j) {
        EXPECT_EQ(got[i][j].token_id, want[j].token_id) << "row " << i;
        EXPECT_EQ(got[i][j].logprob, want[j].logprob) << "row " << i;
        ASSERT_EQ(got[i][j].top_logprobs.size(), want[j].top_logprobs.size()) << "row " << i;
        for (size_t k = 0; k < want[j].top_logprobs.size(); ++k) {
          EXPECT_EQ(got[i][j].top_logprobs[k].token_id, want[j].top_logprobs[k].token_id);
        }
      }
    }
  }
  // An empty batch and one row (sampled inline) work too.
  batch.SampleRows({}, &got);
  EXPECT_TRUE(got.empty());
  batch.SampleRows(std::span<const SamplingRequest>(rows.data(), 1), &got);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0][0].token_id, Sampler(42).Sample(rows[0])[0].token_id);
  kernels::cpu::SetKernelThreads(0);
}

}  // namespace folio
