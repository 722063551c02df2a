#include "scheduler/beam_search.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"

namespace folio {

BeamSelection SelectBeams(std::span<const double> parent_cumulative_logprobs,
                          std::span<const std::vector<SampledToken>> candidates,
                          int32_t beam_width, std::span<const TokenId> end_tokens) {
  FOLIO_CHECK_EQ(parent_cumulative_logprobs.size(), candidates.size());
  std::vector<BeamExtension> all;
  for (size_t b = 0; b < candidates.size(); ++b) {
    for (const SampledToken& c : candidates[b]) {
      all.push_back({static_cast<int32_t>(b), c.token_id, c.logprob,
                     parent_cumulative_logprobs[b] + c.logprob});
    }
  }
  // Stable: equal scores keep (parent, candidate) order, so runs are repeatable.
  std::stable_sort(all.begin(), all.end(), [](const BeamExtension& a, const BeamExtension& b) {
    return a.cumulative_logprob > b.cumulative_logprob;
  });
  BeamSelection out;
  for (size_t rank = 0; rank < all.size(); ++rank) {
    if (static_cast<int32_t>(out.continuing.size()) >= beam_width) break;
    const bool is_end =
        std::find(end_tokens.begin(), end_tokens.end(), all[rank].token) != end_tokens.end();
    if (is_end) {
      if (static_cast<int32_t>(rank) < beam_width) out.finished.push_back(all[rank]);
    } else {
      out.continuing.push_back(all[rank]);
    }
  }
  return out;
}

double BeamScore(double cumulative_logprob, int32_t output_len, float length_penalty) {
  return cumulative_logprob / std::pow(std::max(1, output_len), length_penalty);
}

bool BeamSearchDone(std::span<const double> finished_scores, int32_t beam_width,
                    double best_live_score) {
  if (static_cast<int32_t>(finished_scores.size()) < beam_width) return false;
  return finished_scores[beam_width - 1] >= best_live_score;
}

}  // namespace folio
