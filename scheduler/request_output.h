#ifndef FOLIO_SCHEDULER_REQUEST_OUTPUT_H_
#define FOLIO_SCHEDULER_REQUEST_OUTPUT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "common/step_plan.h"
#include "common/types.h"
#include "scheduler/sequence.h"

namespace folio {

// New tokens of one output sequence since the last output. Requests that
// return every sequence as it grows (n == best_of, no beam search) stream
// deltas; best_of > n and beam search choose their winners at the end, so
// they report once, in full, in rank order.
// Inline storage: a streamed delta is usually one token, and the engine
// loop builds one per sequence per step.
struct SequenceOutput {
  int32_t index = 0;  // 0..n-1
  absl::InlinedVector<TokenId, 4> token_ids;
  absl::InlinedVector<float, 4> logprobs;
  FinishReason finish_reason = FinishReason::kNone;
  double cumulative_logprob = 0.0;
  // Parallel to token_ids when the request asked for SamplingParams::logprobs
  // = N > 0: the N most likely tokens at each position (raw model
  // distribution, best first); empty otherwise. Streamed deltas carry them;
  // ranked outputs (best_of > n, beam search) do not keep them, so there
  // this stays empty.
  std::vector<std::vector<TokenLogprob>> top_logprobs;
};

struct RequestOutput {
  RequestId request_id = 0;
  absl::InlinedVector<SequenceOutput, 1> sequences;
  bool finished = false;
  std::string error;  // set when the request could not be served
  int32_t num_prompt_tokens = 0;
  int32_t num_cached_prompt_tokens = 0;
  int32_t num_output_tokens = 0;  // over all returned sequences, so far
  // Set once, on the first output with sequences (or the final one), when
  // the request asked for SamplingParams::prompt_logprobs: prompt tokens
  // 1..P-1 with their log-probs and top alternatives. A pointer: outputs are
  // built by copying an empty one, every step.
  std::shared_ptr<const std::vector<SampledToken>> prompt_logprobs;
};

}  // namespace folio

#endif  // FOLIO_SCHEDULER_REQUEST_OUTPUT_H_
