#ifndef FOLIO_COMMON_STEP_PLAN_H_
#define FOLIO_COMMON_STEP_PLAN_H_

// The plan the scheduler sends to every worker rank each iteration, and the
// result rank 0 sends back. Its size is O(work of this step): sequences the
// workers already hold travel as diffs. Workers keep a mirror of every live
// sequence's tokens and block table, updated only from plans.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "common/sampling_params.h"
#include "common/types.h"

namespace folio {

// A sequence the workers have not seen before (admitted, forked, or resumed
// after preemption), in full.
struct NewSequenceData {
  SequenceId seq_id = 0;
  RequestId request_id = 0;
  // Position among the request's sequences: with request_id, the stable name
  // seeded sampling keys on (sequence ids depend on scheduling order).
  int32_t sequence_index = 0;
  std::vector<TokenId> prompt_token_ids;
  std::vector<TokenId> output_token_ids;
  std::vector<BlockId> block_ids;  // the whole device block table
  int32_t num_computed_tokens = 0;  // tokens whose KV is already in the cache
  SamplingParams sampling;
};

// A sequence the workers already hold: what changed since the last plan.
struct CachedSequenceData {
  SequenceId seq_id = 0;
  // table[block_table_offset:] = block_ids. Appends start at the old size;
  // a copy-on-write replaces the last block, so it starts one earlier.
  int32_t block_table_offset = 0;
  std::vector<BlockId> block_ids;
  int32_t num_computed_tokens = 0;
};

enum class SampleMode : uint8_t {
  kNone = 0,            // a prefill chunk that does not reach the end of the sequence
  kSample = 1,          // sample num_samples tokens (1, or best_of after the prompt)
  kBeamCandidates = 2,  // return the num_samples most likely tokens with log-probs
};

// What to compute for one sequence this step: token_ids at positions
// start_position, start_position+1, ... (a decode is one token: kept inline).
struct ScheduledSequence {
  SequenceId seq_id = 0;
  int32_t start_position = 0;
  absl::InlinedVector<TokenId, 2> token_ids;
  SampleMode sample_mode = SampleMode::kNone;
  // Score the prompt tokens this chunk predicts: rank 0 returns a
  // PromptLogprobs entry with, for every position p of the chunk with
  // p + 1 < the prompt's length, prompt token p + 1's log-prob and the
  // sampling.prompt_logprobs most likely tokens at p. (Next to sample_mode:
  // in its padding, so plans do not grow.)
  bool prompt_logprobs = false;
  int32_t num_samples = 0;
};

// Copy whole blocks, all layers, K and V. For swaps src and dst are in
// different pools (swap_out: device -> host, swap_in: host -> device).
struct BlockCopy {
  BlockId src = kNoBlock;
  BlockId dst = kNoBlock;
  bool operator==(const BlockCopy&) const = default;
};

// Workers execute, in order: swap_out, swap_in, copies, then the forward pass.
struct StepPlan {
  uint64_t step_id = 0;
  std::vector<NewSequenceData> new_sequences;
  std::vector<CachedSequenceData> cached_sequences;
  std::vector<ScheduledSequence> scheduled;
  std::vector<BlockCopy> swap_out;
  std::vector<BlockCopy> swap_in;
  std::vector<BlockCopy> copies;
  std::vector<SequenceId> finished_seq_ids;   // drop the mirror; blocks already freed
  std::vector<SequenceId> preempted_seq_ids;  // drop the mirror; resent in full on resume
  int32_t num_scheduled_tokens = 0;

  bool empty() const {
    return scheduled.empty() && swap_out.empty() && swap_in.empty() && copies.empty() &&
           finished_seq_ids.empty() && preempted_seq_ids.empty();
  }
};

// A token with its log-probability (natural log).
struct TokenLogprob {
  TokenId token_id = 0;
  float logprob = 0.0f;
};

struct SampledToken {
  TokenId token_id = 0;
  float logprob = 0.0f;
  // The `logprobs` most likely tokens of the same distribution, best first;
  // empty when the request asked for none.
  std::vector<TokenLogprob> top_logprobs;
};

// Rank 0's answer: for every scheduled sequence with a sample mode other than
// kNone, its samples (kSample) or candidates (kBeamCandidates, best first).
struct SequenceSamples {
  SequenceId seq_id = 0;
  std::vector<SampledToken> tokens;
};

// The scored prompt tokens of one ScheduledSequence with prompt_logprobs:
// tokens[i] is prompt token first_index + i (token_id), its log-prob given
// the tokens before it, and the most likely tokens there (top_logprobs).
struct PromptLogprobs {
  SequenceId seq_id = 0;
  int32_t first_index = 0;  // the chunk's start_position + 1
  std::vector<SampledToken> tokens;
};

struct StepResult {
  uint64_t step_id = 0;
  std::vector<SequenceSamples> samples;
  // One entry per scheduled sequence with prompt_logprobs, in plan order.
  std::vector<PromptLogprobs> prompt_logprobs;
};

}  // namespace folio

#endif  // FOLIO_COMMON_STEP_PLAN_H_
