// Beam search: one selection step over all live beams, scoring, stopping.

#include "scheduler/beam_search.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace folio {
namespace {

constexpr TokenId kEos = 2;

std::vector<SampledToken> Cands(std::initializer_list<std::pair<TokenId, float>> c) {
  std::vector<SampledToken> out;
  for (const auto& [t, lp] : c) out.push_back({t, lp, {}});
  return out;
}

TEST(SelectBeamsTest, RanksByCumulativeLogprobAcrossBeams) {
  // Beam 0 is far behind; its best candidate still loses to beam 1's second.
  const std::vector<double> parents = {-10.0, -1.0};
  const std::vector<std::vector<SampledToken>> cands = {
      Cands({{100, -0.1f}, {101, -0.2f}}),
      Cands({{200, -0.5f}, {201, -1.0f}}),
  };
  const TokenId eos[] = {kEos};
  BeamSelection sel = SelectBeams(parents, cands, 2, eos);
  ASSERT_EQ(sel.continuing.size(), 2u);
  EXPECT_TRUE(sel.finished.empty());
  EXPECT_EQ(sel.continuing[0].parent, 1);
  EXPECT_EQ(sel.continuing[0].token, 200);
  EXPECT_FLOAT_EQ(sel.continuing[0].logprob, -0.5f);
  EXPECT_DOUBLE_EQ(sel.continuing[0].cumulative_logprob, -1.5);
  EXPECT_EQ(sel.continuing[1].parent, 1);
  EXPECT_EQ(sel.continuing[1].token, 201);
  EXPECT_DOUBLE_EQ(sel.continuing[1].cumulative_logprob, -2.0);
}

TEST(SelectBeamsTest, InterleavesParentsByScore) {
  const std::vector<double> parents = {-1.0, -1.2};
  const std::vector<std::vector<SampledToken>> cands = {
      Cands({{10, -0.1f}, {11, -0.9f}, {12, -2.0f}}),
      Cands({{20, -0.1f}, {21, -0.3f}, {22, -3.0f}}),
  };
  BeamSelection sel = SelectBeams(parents, cands, 3, {});
  ASSERT_EQ(sel.continuing.size(), 3u);
  // -1.1 (10), -1.3 (20), -1.5 (21); then -1.9 (11) is out.
  EXPECT_EQ(sel.continuing[0].token, 10);
  EXPECT_EQ(sel.continuing[1].token, 20);
  EXPECT_EQ(sel.continuing[2].token, 21);
  EXPECT_EQ(sel.continuing[0].parent, 0);
  EXPECT_EQ(sel.continuing[1].parent, 1);
  EXPECT_EQ(sel.continuing[2].parent, 1);
  for (size_t i = 1; i < sel.continuing.size(); ++i) {
    EXPECT_GE(sel.continuing[i - 1].cumulative_logprob, sel.continuing[i].cumulative_logprob);
  }
}

TEST(SelectBeamsTest, EosWithinTopKFinishesAndTheNextCandidateContinues) {
  const std::vector<double> parents = {0.0, -0.5};
  const std::vector<std::vector<SampledToken>> cands = {
      Cands({{kEos, -0.1f}, {30, -0.2f}, {31, -5.0f}, {32, -6.0f}}),
      Cands({{40, -0.1f}, {kEos, -0.2f}, {41, -5.0f}, {42, -6.0f}}),
  };
  const TokenId eos[] = {kEos};
  // Ranking: EOS(0) -0.1, 30 -0.2, 40 -0.6, EOS(1) -0.7, 41 -5.5, 31 -5.0 ...
  BeamSelection sel = SelectBeams(parents, cands, 2, eos);
  ASSERT_EQ(sel.finished.size(), 1u);
  EXPECT_EQ(sel.finished[0].parent, 0);
  EXPECT_EQ(sel.finished[0].token, kEos);
  EXPECT_NEAR(sel.finished[0].cumulative_logprob, -0.1, 1e-6);
  ASSERT_EQ(sel.continuing.size(), 2u);
  EXPECT_EQ(sel.continuing[0].token, 30);
  EXPECT_EQ(sel.continuing[1].token, 40);
}

TEST(SelectBeamsTest, EosBelowRankKIsIgnored) {
  const std::vector<double> parents = {0.0};
  const std::vector<std::vector<SampledToken>> cands = {
      Cands({{50, -0.1f}, {51, -0.2f}, {kEos, -0.3f}, {52, -0.4f}}),
  };
  const TokenId eos[] = {kEos};
  BeamSelection sel = SelectBeams(parents, cands, 2, eos);
  EXPECT_TRUE(sel.finished.empty());
  ASSERT_EQ(sel.continuing.size(), 2u);
  EXPECT_EQ(sel.continuing[0].token, 50);
  EXPECT_EQ(sel.continuing[1].token, 51);
}

TEST(SelectBeamsTest, EosAtRankKMinusOneCountsEosAtRankKDoesNot) {
  const std::vector<double> parents = {0.0};
  const TokenId eos[] = {kEos, 3};
  // Two end tokens ranked 0 and 1 with k = 2: both finish; continuing beams
  // then come from further down.
  BeamSelection sel =
      SelectBeams(parents,
                  std::vector<std::vector<SampledToken>>{
                      Cands({{kEos, -0.1f}, {3, -0.2f}, {60, -0.3f}, {61, -0.4f}, {62, -0.5f}})},
                  2, eos);
  ASSERT_EQ(sel.finished.size(), 2u);
  ASSERT_EQ(sel.continuing.size(), 2u);
  EXPECT_EQ(sel.continuing[0].token, 60);
  EXPECT_EQ(sel.continuing[1].token, 61);
  // An end token at rank 2 (k = 2) is past the window.
  sel = SelectBeams(parents,
                    std::vector<std::vector<SampledToken>>{
                        Cands({{60, -0.1f}, {kEos, -0.2f}, {3, -0.3f}, {61, -0.4f}})},
                    2, eos);
  ASSERT_EQ(sel.finished.size(), 1u);
  EXPECT_EQ(sel.finished[0].token, kEos);
  ASSERT_EQ(sel.continuing.size(), 2u);
  EXPECT_EQ(sel.continuing[1].token, 61);
}

TEST(SelectBeamsTest, ReturnsAtMostKContinuing) {
  const std::vector<double> parents = {0.0, 0.0, 0.0};
  std::vector<std::vector<SampledToken>> cands;
  for (int b = 0; b < 3; ++b) {
    cands.push_back(Cands({{100 * b + 1, -0.1f * (b + 1)},
                           {100 * b + 2, -0.2f * (b + 1)},
                           {100 * b + 3, -0.3f * (b + 1)},
                           {100 * b + 4, -0.4f * (b + 1)},
                           {100 * b + 5, -0.5f * (b + 1)},
                           {100 * b + 6, -0.6f * (b + 1)}}));
  }
  for (int32_t k = 1; k <= 3; ++k) {
    BeamSelection sel = SelectBeams(parents, cands, k, {});
    EXPECT_EQ(static_cast<int32_t>(sel.continuing.size()), k);
  }
  // Fewer candidates than k: all of them.
  const std::vector<double> one = {0.0};
  const std::vector<std::vector<SampledToken>> few = {Cands({{7, -1.0f}})};
  EXPECT_EQ(SelectBeams(one, few, 4, {}).continuing.size(), 1u);
  // Every candidate an end token: nothing continues.
  const TokenId eos[] = {kEos};
  const std::vector<std::vector<SampledToken>> only_eos = {Cands({{kEos, -1.0f}})};
  BeamSelection sel = SelectBeams(one, only_eos, 2, eos);
  EXPECT_TRUE(sel.continuing.empty());
  EXPECT_EQ(sel.finished.size(), 1u);
}

TEST(SelectBeamsTest, TiesKeepParentThenCandidateOrder) {
  const std::vector<double> parents = {-1.0, -1.0};
  const std::vector<std::vector<SampledToken>> cands = {
      Cands({{1, -0.5f}, {2, -0.5f}}),
      Cands({{3, -0.5f}, {4, -0.5f}}),
  };
  BeamSelection sel = SelectBeams(parents, cands, 3, {});
  ASSERT_EQ(sel.continuing.size(), 3u);
  EXPECT_EQ(sel.continuing[0].token, 1);
  EXPECT_EQ(sel.continuing[1].token, 2);
  EXPECT_EQ(sel.continuing[2].token, 3);
}

TEST(BeamScoreTest, LengthPenalty) {
  EXPECT_DOUBLE_EQ(BeamScore(-6.0, 3, 1.0f), -2.0);
  EXPECT_DOUBLE_EQ(BeamScore(-6.0, 3, 0.0f), -6.0);  // no normalization
  EXPECT_NEAR(BeamScore(-8.0, 4, 0.5f), -4.0, 1e-12);
  EXPECT_NEAR(BeamScore(-8.0, 4, 2.0f), -0.5, 1e-12);
  // Zero-length output does not divide by zero.
  EXPECT_DOUBLE_EQ(BeamScore(-1.5, 0, 1.0f), -1.5);
  // With a positive penalty, a longer hypothesis with the same per-token
  // log-prob scores the same; without, it scores worse.
  EXPECT_DOUBLE_EQ(BeamScore(-10.0, 10, 1.0f), BeamScore(-5.0, 5, 1.0f));
  EXPECT_LT(BeamScore(-10.0, 10, 0.0f), BeamScore(-5.0, 5, 0.0f));
}

TEST(BeamSearchDoneTest, NeedsKFinishedAndNoLiveBeamBetterThanTheKth) {
  const std::vector<double> none;
  EXPECT_FALSE(BeamSearchDone(none, 2, -100.0));
  const std::vector<double> one = {-1.0};
  EXPECT_FALSE(BeamSearchDone(one, 2, -100.0));  // fewer than k finished
  const std::vector<double> two = {-1.0, -2.0};
  EXPECT_TRUE(BeamSearchDone(two, 2, -2.5));   // live beam cannot reach -2
  EXPECT_TRUE(BeamSearchDone(two, 2, -2.0));   // ties do not continue
  EXPECT_FALSE(BeamSearchDone(two, 2, -1.5));  // it could still beat -2
  EXPECT_TRUE(BeamSearchDone(two, 1, -1.5));   // k = 1 compares with the best
  const std::vector<double> three = {-1.0, -2.0, -3.0};
  EXPECT_FALSE(BeamSearchDone(three, 2, -1.9));  // compares with the k-th, not the last
  EXPECT_TRUE(BeamSearchDone(three, 2, -2.1));
}

}  // namespace
}  // namespace folio
