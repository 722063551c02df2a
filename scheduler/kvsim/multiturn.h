// folio-kvsim's multi-turn chat workload: the prefix cache's reuse, device
// only or with the host tier, measured by the real scheduler and block
// manager (the model replaced by SimulatedWorker, which checks every KV slot,
// so a block swapped back from the host must hold exactly its tokens).
//
// Each conversation opens with a system prompt shared by all of them; every
// turn re-sends the whole history (system prompt, earlier user messages and
// the replies generated for them) plus a new user message, as chat clients
// do. A fixed number of conversations is in flight at once, closed loop: a
// turn is sent when the previous one's reply is complete, and a finished
// conversation makes way for the next. Between two turns of one
// conversation the others pass through the cache, which is what evicts.
#ifndef FOLIO_SCHEDULER_KVSIM_MULTITURN_H_
#define FOLIO_SCHEDULER_KVSIM_MULTITURN_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "scheduler/kvsim/simulation.h"

namespace folio::kvsim {

// The conversations' shape. Lengths are in tokens and drawn per conversation
// from the seed: turns 1 + geometric (mean mean_turns, at most max_turns),
// user messages and replies log-normal (sigma 0.8) with these means. A
// conversation ends early when its next turn would not fit max_model_len.
struct MultiTurnWorkload {
  int32_t conversations = 200;
  int32_t concurrency = 16;  // conversations in flight at once
  int32_t system_prompt_len = 200;
  double mean_turns = 4.0;
  int32_t max_turns = 16;
  double mean_user_len = 64;
  double mean_reply_len = 160;
};

struct MultiTurnResult {
  int64_t requests = 0;  // turns sent
  int64_t prompt_tokens = 0;
  int64_t hit_tokens = 0;       // prompt tokens found in the cache (either tier)
  int64_t host_hit_tokens = 0;  // of those, swapped back from the host tier
  int64_t computed_prompt_tokens = 0;  // prompt tokens computed (recomputed history included)
  int64_t blocks_to_host = 0;
  int64_t blocks_from_host = 0;
  int64_t blocks_over_budget = 0;  // the host tier's per-step budget left out
  int64_t steps = 0;
  int64_t preemptions = 0;
  int64_t failed_requests = 0;
  double hit_rate() const {
    return prompt_tokens > 0 ? static_cast<double>(hit_tokens) / prompt_tokens : 0.0;
  }
};

// Plays `workload` on a device pool of options.token_slots (prefix caching
// on) and a host pool of host_token_slots; the host tier caches there when
// `host_tier` is set (swap of preempted requests uses it either way).
// `host_tier_blocks_per_step` is SchedulerConfig's (-1: the token budget's).
absl::StatusOr<MultiTurnResult> SimulateMultiTurn(const MultiTurnWorkload& workload,
                                                  const SimulationOptions& options,
                                                  int64_t host_token_slots, bool host_tier,
                                                  int32_t host_tier_blocks_per_step = -1);

}  // namespace folio::kvsim

#endif  // FOLIO_SCHEDULER_KVSIM_MULTITURN_H_
