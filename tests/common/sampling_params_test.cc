// SortLogitBias: the one ordering of logit biases that the server's request
// parsing and `folio run` both produce, and that validation requires.

#include "common/sampling_params.h"

#include <vector>

#include "gtest/gtest.h"

namespace folio {
namespace {

TEST(SortLogitBiasTest, AscendingTokensAndTheLastValueOfARepeatedOne) {
  std::vector<TokenBias> biases = {{9, 1.0f}, {3, -2.0f}, {9, 5.0f}, {0, 0.5f}, {3, 7.0f}, {9, -1.0f}};
  SortLogitBias(&biases);
  EXPECT_EQ(biases, (std::vector<TokenBias>{{0, 0.5f}, {3, 7.0f}, {9, -1.0f}}));
  SamplingParams p;
  p.logit_bias = biases;
  EXPECT_TRUE(ValidateSamplingParams(p).ok());

  std::vector<TokenBias> none;
  SortLogitBias(&none);
  EXPECT_TRUE(none.empty());
}

}  // namespace
}  // namespace folio
