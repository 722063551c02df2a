#ifndef FOLIO_SCHEDULER_SEQUENCE_H_
#define FOLIO_SCHEDULER_SEQUENCE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/step_plan.h"
#include "common/types.h"
#include "scheduler/block_hash.h"
#include "scheduler/block_table.h"

namespace folio {

enum class FinishReason : uint8_t {
  kNone = 0,  // still running
  kLength,    // max_tokens, max_model_len, or the KV cache cannot hold it
  kStop,      // a stop token id (stop strings are matched by the front end)
  kEos,
  kAbort,
  kError,
};
const char* FinishReasonName(FinishReason reason);

// One token stream: the request's prompt followed by its own generated
// tokens. Its KV lives in the blocks of its block table; tokens
// [0, num_computed_tokens) are in the cache. The scheduler catches
// num_computed_tokens up with num_tokens under the token budget: prefill,
// chunked prefill, recompute and decode are all the same motion.
class alignas(64) Sequence {
 public:
  Sequence(SequenceId id, RequestId request_id, int32_t index, std::span<const TokenId> prompt);
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  // A child sharing this sequence's tokens and log-probs. The caller (the
  // KvCacheManager) shares the blocks.
  std::unique_ptr<Sequence> Fork(SequenceId child_id, int32_t child_index) const;

  SequenceId id() const { return id_; }
  RequestId request_id() const { return request_id_; }
  int32_t index() const { return index_; }  // position among the request's sequences

  const std::vector<TokenId>& tokens() const { return tokens_; }
  int32_t num_tokens() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t num_prompt_tokens() const { return num_prompt_tokens_; }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens_; }
  std::span<const TokenId> prompt_tokens() const { return {tokens_.data(), static_cast<size_t>(num_prompt_tokens_)}; }
  std::span<const TokenId> output_tokens() const {
    return {tokens_.data() + num_prompt_tokens_, static_cast<size_t>(num_output_tokens())};
  }
  const std::vector<float>& output_logprobs() const { return output_logprobs_; }
  double cumulative_logprob() const { return cumulative_logprob_; }
  void AppendToken(TokenId token, float logprob) {
    tokens_.push_back(token);
    output_logprobs_.push_back(logprob);
    cumulative_logprob_ += logprob;
  }
  // Room for `num_tokens` tokens in all (prompt included), so appending up
  // to there never reallocates. Capacity only: the contents do not change.
  void ReserveTokens(int32_t num_tokens);

  int32_t num_computed_tokens() const { return num_computed_tokens_; }
  void set_num_computed_tokens(int32_t n) { num_computed_tokens_ = n; }
  // Tokens not yet in the cache. A running sequence always has at least one:
  // the last sampled token, whose KV is computed with the next step.
  int32_t num_pending_tokens() const { return num_tokens() - num_computed_tokens_; }

  BlockTable& block_table() { return block_table_; }
  const BlockTable& block_table() const { return block_table_; }
  // Chain hashes of this sequence's full blocks, computed once per block.
  std::vector<BlockHash>& block_hashes() { return block_hashes_; }
  const std::vector<BlockHash>& block_hashes() const { return block_hashes_; }

  FinishReason finish_reason() const { return finish_reason_; }
  bool is_finished() const { return finish_reason_ != FinishReason::kNone; }
  void Finish(FinishReason reason) { finish_reason_ = reason; }

  // Whether the workers hold a mirror of this sequence (set by the plan builder).
  bool known_to_workers() const { return known_to_workers_; }
  void set_known_to_workers(bool known) { known_to_workers_ = known; }
  // Output tokens already handed to the front end.
  int32_t num_streamed_tokens() const { return num_streamed_tokens_; }
  void set_num_streamed_tokens(int32_t n) { num_streamed_tokens_ = n; }

 private:
  // Layout: the scheduler touches every running sequence twice a step
  // (Schedule and Update), so the fields a decode step reads or writes fill
  // the first two cache lines of an aligned object; the rest sits after them.
  const SequenceId id_;
  const int32_t index_;
  int32_t num_prompt_tokens_;
  int32_t num_computed_tokens_ = 0;
  int32_t num_streamed_tokens_ = 0;
  FinishReason finish_reason_ = FinishReason::kNone;
  bool known_to_workers_ = false;
  double cumulative_logprob_ = 0.0;
  std::vector<TokenId> tokens_;
  std::vector<float> output_logprobs_;
  BlockTable block_table_;
  // Cold: read when a block fills or the workers first see the sequence.
  std::vector<BlockHash> block_hashes_;
  const RequestId request_id_;
};

}  // namespace folio

#endif  // FOLIO_SCHEDULER_SEQUENCE_H_
