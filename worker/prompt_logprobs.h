#ifndef FOLIO_WORKER_PROMPT_LOGPROBS_H_
#define FOLIO_WORKER_PROMPT_LOGPROBS_H_

// Prompt scoring (SamplingParams::prompt_logprobs), shared by the CPU and
// CUDA workers: for every scheduled chunk with prompt_logprobs, the logits of
// each position p whose next token p + 1 is still in the prompt give that
// token's log-prob (raw log-softmax, like sampled tokens') and the most likely
// tokens there. The logits come from the worker's runner, a bounded number of
// rows at a time, so scoring a long prompt chunk never holds more than
// max_rows * vocab floats.

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "common/plan_mirror.h"
#include "common/step_plan.h"
#include "common/types.h"
#include "kernels/cpu/sampling.h"
#include "worker/forward_batch.h"

namespace folio {

// Prompt positions scored per LM-head call: bounds the logits held at once
// (64 x vocab floats).
inline constexpr int32_t kMaxScoredRowsPerCall = 64;

// The collective part of scoring: the LM head on `rows` of the last forward
// pass's batch, its logits left where ScoreRowsFn reads them (rank 0). Every
// rank of a tensor-parallel group is called with the same rows, in the same
// order.
using RowLogitsFn = std::function<absl::Status(std::span<const int32_t> rows)>;
// Rank 0's part: for the rows RowLogitsFn just made, row i's log-prob of
// targets[i] and its num_top most likely tokens, appended to *scored in
// order. REQUIRES every target in [0, vocab).
using ScoreRowsFn = std::function<absl::Status(
    std::span<const TokenId> targets, int32_t num_top, std::vector<SampledToken>* scored)>;

// Scores the prompts of `plan`'s chunks with prompt_logprobs, after the
// forward pass of `batch` (BuildForwardBatch's, with `seqs` its mirrored
// sequences). On rank 0 (`score`) appends one PromptLogprobs per such chunk,
// in plan order, to `out`; other ranks only take part in `logits_of`. Every
// rank makes all its `logits_of` calls even when scoring fails on rank 0 (a
// partner rank would wait in the collective), and returns the error after;
// a failed `logits_of` (the collective itself) returns at once.
// REQUIRES: max_rows >= 1.
absl::Status ScorePrompts(const StepPlan& plan, const ForwardBatch& batch,
                          std::span<const MirroredSequence* const> seqs, int32_t vocab_size,
                          int32_t max_rows, bool score, const RowLogitsFn& logits_of,
                          const ScoreRowsFn& score_rows, std::vector<PromptLogprobs>* out);

// One row: `target`'s log-prob under log_softmax(logits) and the num_top most
// likely tokens (best first, ties lower id first), as the sampler reports
// them. `scratch` is reused between calls.
struct PromptRowScratch {
  std::vector<float> logprobs;
  std::vector<int32_t> order;
  std::vector<kernels::cpu::ScoredToken> top;
};
SampledToken ScorePromptRow(std::span<const float> logits, TokenId target, int32_t num_top,
                            PromptRowScratch* scratch);

// ScoreRowsFn on the host, from `logits` [targets.size()][vocab] (the CPU
// worker's): INTERNAL when the logits are not that size.
absl::Status ScoreRowsOnHost(std::span<const float> logits, int32_t vocab,
                             std::span<const TokenId> targets, int32_t num_top,
                             PromptRowScratch* scratch, std::vector<SampledToken>* scored);

}  // namespace folio

#endif  // FOLIO_WORKER_PROMPT_LOGPROBS_H_
