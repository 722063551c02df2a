#include "scheduler/sequence.h"

namespace folio {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "none";
    case FinishReason::kLength: return "length";
    case FinishReason::kStop: return "stop";
    case FinishReason::kEos: return "eos";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kError: return "error";
  }
  return "unknown";
}

Sequence::Sequence(SequenceId id, RequestId request_id, int32_t index,
                   std::span<const TokenId> prompt)
    : id_(id),
      index_(index),
      num_prompt_tokens_(static_cast<int32_t>(prompt.size())),
      tokens_(prompt.begin(), prompt.end()),
      request_id_(request_id) {}

std::unique_ptr<Sequence> Sequence::Fork(SequenceId child_id, int32_t child_index) const {
  auto child = std::make_unique<Sequence>(child_id, request_id_, child_index, prompt_tokens());
  child->ReserveTokens(static_cast<int32_t>(tokens_.capacity()));  // room the parent was given
  child->tokens_ = tokens_;
  child->output_logprobs_ = output_logprobs_;
  child->cumulative_logprob_ = cumulative_logprob_;
  child->num_computed_tokens_ = num_computed_tokens_;
  child->block_hashes_ = block_hashes_;
  child->num_streamed_tokens_ = num_streamed_tokens_;
  return child;
}

void Sequence::ReserveTokens(int32_t num_tokens) {
  if (num_tokens <= num_prompt_tokens_) return;
  tokens_.reserve(num_tokens);
  output_logprobs_.reserve(num_tokens - num_prompt_tokens_);
}

}  // namespace folio
