#ifndef FOLIO_SCHEDULER_BEAM_SEARCH_H_
#define FOLIO_SCHEDULER_BEAM_SEARCH_H_

#include <cstdint>
#include <span>
#include <vector>

#include "common/step_plan.h"
#include "common/types.h"

namespace folio {

// One extension of a live beam by one token.
struct BeamExtension {
  int32_t parent = 0;  // index into the live beams
  TokenId token = 0;
  float logprob = 0.0f;
  double cumulative_logprob = 0.0;
};

struct BeamSelection {
  std::vector<BeamExtension> continuing;  // at most beam_width, best first
  std::vector<BeamExtension> finished;    // end-of-sequence picks ranked within beam_width
};

// One step of beam search over all live beams at once: rank every candidate
// by the parent's cumulative log-prob plus its own; walk down the ranking,
// an end token among the top beam_width ranks finishes a hypothesis, other
// tokens continue until beam_width beams are chosen.
BeamSelection SelectBeams(std::span<const double> parent_cumulative_logprobs,
                          std::span<const std::vector<SampledToken>> candidates,
                          int32_t beam_width, std::span<const TokenId> end_tokens);

// Length-normalized score used to rank finished hypotheses.
double BeamScore(double cumulative_logprob, int32_t output_len, float length_penalty);

// True when no live beam can still beat the beam_width-th finished one:
// `finished_scores` sorted descending. (The "early_stopping=False" rule.)
bool BeamSearchDone(std::span<const double> finished_scores, int32_t beam_width,
                    double best_live_score);

}  // namespace folio

#endif  // FOLIO_SCHEDULER_BEAM_SEARCH_H_
