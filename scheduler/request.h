#ifndef FOLIO_SCHEDULER_REQUEST_H_
#define FOLIO_SCHEDULER_REQUEST_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "common/sampling_params.h"
#include "common/step_plan.h"
#include "common/types.h"
#include "scheduler/sequence.h"

namespace folio {

// A request's live sequences; most requests have one, so no heap.
using SequencePtrs = absl::InlinedVector<Sequence*, 4>;

enum class RequestStatus : uint8_t { kWaiting, kRunning, kSwapped, kFinished };

// A finished beam of beam search: a snapshot, it holds no blocks.
struct FinishedBeam {
  std::vector<TokenId> output_tokens;
  std::vector<float> output_logprobs;
  double cumulative_logprob = 0.0;
  double score = 0.0;  // cumulative_logprob / length^length_penalty
  FinishReason reason = FinishReason::kNone;
};

// What the caller hands the scheduler. Validated by Scheduler::AddRequest.
struct RequestSpec {
  RequestId id = 0;
  std::vector<TokenId> prompt;
  SamplingParams sampling;
  int32_t priority = 0;  // lower value = more important (priority policy)
  std::string cache_salt;
  std::vector<TokenId> eos_token_ids;
  // Known output length, for the oracle and pow2 reservation policies of
  // benchmarks and the simulator; -1 when unknown, and then those policies
  // take sampling.max_tokens (what the request can produce at most, exact
  // under ignore_eos).
  int32_t expected_output_len = -1;
};

// A group of 1..n sequences sharing one prompt, and where it stands.
//
// Layout: every step reads each running request twice (Schedule and
// Update); what those loops touch sits in the first cache line of an aligned
// object, then the spec (whose sampling parameters they also read).
struct alignas(64) Request {
  // Sequences still generating (beam search: the live beams). Most requests
  // have one: inline, so reaching it costs no pointer chase.
  absl::InlinedVector<std::unique_ptr<Sequence>, 1> seqs;
  // Sequences done generating (sampling), in finishing order.
  std::vector<std::unique_ptr<Sequence>> finished_seqs;
  // Token slots reserved at admission (reservation policies), 0 = on demand.
  int32_t reserved_tokens = 0;
  int32_t num_cached_prompt_tokens = 0;  // prefix-cache hit at first admission
  // While waiting: what it counts in Scheduler::num_waiting_tokens().
  int32_t waiting_tokens = 0;
  RequestStatus status = RequestStatus::kWaiting;
  // True once the prompt fanned out into best_of samples or beams.
  bool fanned_out = false;
  // A recompute-preempted request resumes from the front of the queue.
  bool preempted = false;
  bool counted_cached_prompt = false;
  int32_t num_preemptions = 0;
  int32_t num_worker_requeues = 0;  // worker failures that requeued it

  RequestSpec spec;
  uint64_t arrival = 0;  // admission order, ties broken by it
  std::vector<FinishedBeam> finished_beams;
  std::string error;  // why it finished with kError / kLength at admission
  // Prompt scoring (SamplingParams::prompt_logprobs): prompt tokens
  // 1..size() scored so far, handed whole to the request's first output.
  std::vector<SampledToken> prompt_logprobs;
  bool prompt_logprobs_sent = false;
  // Prompt positions still need scoring: every one must be computed (no
  // prefix-cache hits) and its logits scored. Set at admission for prompts
  // of 2+ tokens, cleared once all are scored or the request ends. (The
  // scheduler reads these fields only while some live request asked for
  // prompt scores: Scheduler::num_prompt_logprob_requests_.)
  bool scores_prompt = false;

  int32_t num_prompt_tokens() const { return static_cast<int32_t>(spec.prompt.size()); }
  SequencePtrs LiveSequences() const {
    SequencePtrs out;
    for (const auto& s : seqs) out.push_back(s.get());
    return out;
  }
  int32_t num_live_sequences() const { return static_cast<int32_t>(seqs.size()); }
};

}  // namespace folio

#endif  // FOLIO_SCHEDULER_REQUEST_H_
