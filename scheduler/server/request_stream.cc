#include "scheduler/server/request_stream.h"

#include <algorithm>

namespace folio {
namespace {

// Prompt scores per message: a long prompt's would pass the 4 MiB a gRPC
// client accepts by default (about 232 bytes a token with 20 alternatives).
constexpr size_t kPromptLogprobsPerMessage = 4096;

void ToProtoLogprob(TokenId token, float logprob, const std::vector<TokenLogprob>& top,
                    v1::TokenLogprob* out) {
  out->set_token_id(token);
  out->set_logprob(logprob);
  out->mutable_top_logprobs()->Reserve(static_cast<int>(top.size()));
  for (const TokenLogprob& alt : top) {
    v1::TopLogprob* t = out->add_top_logprobs();
    t->set_token_id(alt.token_id);
    t->set_logprob(alt.logprob);
  }
}

// Prompt scores [begin, end) into `chunk`.
void AppendPromptLogprobs(const std::vector<SampledToken>& scored, size_t begin, size_t end,
                          v1::Chunk* chunk) {
  chunk->mutable_prompt_logprobs()->Reserve(static_cast<int>(end - begin));
  for (size_t i = begin; i < end; ++i) {
    ToProtoLogprob(scored[i].token_id, scored[i].logprob, scored[i].top_logprobs,
                   chunk->add_prompt_logprobs());
  }
}

}  // namespace

v1::FinishReason ToProtoFinishReason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return v1::FINISH_REASON_UNSPECIFIED;
    case FinishReason::kLength: return v1::FINISH_REASON_LENGTH;
    case FinishReason::kStop: return v1::FINISH_REASON_STOP;
    case FinishReason::kEos: return v1::FINISH_REASON_EOS;
    case FinishReason::kAbort: return v1::FINISH_REASON_ABORT;
    case FinishReason::kError: return v1::FINISH_REASON_ERROR;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

RequestStream::RequestStream(std::string request_id, const Tokenizer& tokenizer,
                             const ParsedRequest& request, int32_t stream_interval)
    : request_id_(std::move(request_id)),
      tokenizer_(tokenizer),
      stop_strings_(request.stop_strings),
      text_options_(request.text),
      logprobs_(request.logprobs),
      num_prompt_tokens_(static_cast<uint32_t>(request.spec.prompt.size())),
      stream_interval_(std::max<int32_t>(stream_interval, 1)) {
  sequences_.resize(request.spec.sampling.n);
}

RequestStream::SequenceState& RequestStream::StateFor(int32_t index) {
  if (static_cast<size_t>(index) >= sequences_.size()) sequences_.resize(index + 1);
  SequenceState& s = sequences_[index];
  if (s.text == nullptr) {
    s.text = std::make_unique<SequenceText>(tokenizer_, stop_strings_, text_options_);
  }
  return s;
}

bool RequestStream::ApplyDelta(const SequenceOutput& delta, v1::SequenceDelta* out) {
  SequenceState& s = StateFor(delta.index);
  if (s.reason != FinishReason::kNone) return false;  // stopped here earlier
  out->set_index(static_cast<uint32_t>(delta.index));
  std::string text;
  double dropped_logprob = 0.0;
  for (size_t i = 0; i < delta.token_ids.size(); ++i) {
    const float logprob = i < delta.logprobs.size() ? delta.logprobs[i] : 0.0f;
    if (s.reason != FinishReason::kNone) {  // after a stop string
      dropped_logprob += logprob;
      continue;
    }
    const TokenId token = delta.token_ids[i];
    out->add_token_ids(token);
    ++s.num_tokens;
    s.last_token = token;
    if (logprobs_.has_value()) {
      static const std::vector<TokenLogprob> kNone;
      ToProtoLogprob(token, logprob, i < delta.top_logprobs.size() ? delta.top_logprobs[i] : kNone,
                     out->add_logprobs());
    }
    // A stop token id or EOS ends the sequence without its text unless
    // include_stop_str_in_output (as in vLLM); it is the delta's last token.
    const bool end_token = i + 1 == delta.token_ids.size() &&
                           (delta.finish_reason == FinishReason::kStop ||
                            delta.finish_reason == FinishReason::kEos);
    if (!end_token || text_options_.include_stop) text += s.text->Append(token);
    if (s.text->stopped()) s.reason = FinishReason::kStop;
  }
  s.cumulative_logprob = delta.cumulative_logprob - dropped_logprob;
  if (s.reason == FinishReason::kNone && delta.finish_reason != FinishReason::kNone) {
    text += s.text->Finish();
    s.reason = delta.finish_reason;
    if (s.reason == FinishReason::kStop) s.stop_token = s.last_token;
  }
  out->set_text(std::move(text));
  if (s.reason != FinishReason::kNone) out->set_finish_reason(ToProtoFinishReason(s.reason));
  return !out->token_ids().empty() || !out->text().empty() || s.reason != FinishReason::kNone;
}

std::vector<v1::GenerateResponse> RequestStream::Consume(const RequestOutput& output,
                                                         Stopped* stopped) {
  *stopped = Stopped();
  std::vector<v1::GenerateResponse> messages;
  if (finished_) return messages;
  v1::GenerateResponse chunk;
  chunk.set_request_id(request_id_);
  if (output.prompt_logprobs != nullptr) {
    // The prompt's scores lead: whole chunks of them while more than one
    // message's worth is left, the rest in this output's chunk (even empty).
    const std::vector<SampledToken>& scored = *output.prompt_logprobs;
    size_t begin = 0;
    for (; scored.size() - begin > kPromptLogprobsPerMessage; begin += kPromptLogprobsPerMessage) {
      v1::GenerateResponse& part = messages.emplace_back();
      part.set_request_id(request_id_);
      AppendPromptLogprobs(scored, begin, begin + kPromptLogprobsPerMessage, part.mutable_chunk());
    }
    AppendPromptLogprobs(scored, begin, scored.size(), chunk.mutable_chunk());
  }
  for (const SequenceOutput& delta : output.sequences) {
    v1::SequenceDelta* d = chunk.mutable_chunk()->add_deltas();
    const bool was_running = StateFor(delta.index).reason == FinishReason::kNone;
    if (!ApplyDelta(delta, d)) {
      chunk.mutable_chunk()->mutable_deltas()->RemoveLast();
      continue;
    }
    const SequenceState& s = sequences_[delta.index];
    if (was_running && s.text->stopped()) stopped->sequences.push_back(delta.index);
  }
  if (chunk.has_chunk() && (chunk.chunk().deltas_size() > 0 || output.prompt_logprobs != nullptr)) {
    if (Hold(std::move(chunk))) Release(&messages);
  }
  if (output.finished) {
    Release(&messages);
    messages.push_back(MakeFinished(&output));
    stopped->sequences.clear();  // the scheduler is done with them
  } else if (!stopped->sequences.empty()) {
    stopped->request = std::all_of(sequences_.begin(), sequences_.end(),
                                   [](const SequenceState& s) {
                                     return s.reason != FinishReason::kNone;
                                   });
    if (stopped->request) stopped->sequences.clear();
  }
  return messages;
}

bool RequestStream::Hold(v1::GenerateResponse chunk) {
  if (!held_.has_value()) {
    held_ = std::move(chunk);
  } else {
    // Merge delta by delta: a sequence's tokens, text and log-probs run on.
    v1::Chunk* into = held_->mutable_chunk();
    for (v1::SequenceDelta& d : *chunk.mutable_chunk()->mutable_deltas()) {
      auto same = std::find_if(into->mutable_deltas()->begin(), into->mutable_deltas()->end(),
                               [&](const v1::SequenceDelta& h) { return h.index() == d.index(); });
      if (same == into->mutable_deltas()->end()) {
        *into->add_deltas() = std::move(d);
        continue;
      }
      same->mutable_token_ids()->MergeFrom(d.token_ids());
      same->mutable_text()->append(d.text());
      for (v1::TokenLogprob& lp : *d.mutable_logprobs()) *same->add_logprobs() = std::move(lp);
      if (d.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
        same->set_finish_reason(d.finish_reason());
      }
    }
  }
  // Due: until the first token is out, when a sequence ended, or N tokens held.
  if (!sent_tokens_ || stream_interval_ <= 1) return true;
  return std::any_of(held_->chunk().deltas().begin(), held_->chunk().deltas().end(),
                     [&](const v1::SequenceDelta& d) {
                       return d.finish_reason() != v1::FINISH_REASON_UNSPECIFIED ||
                              d.token_ids_size() >= stream_interval_;
                     });
}

void RequestStream::Release(std::vector<v1::GenerateResponse>* messages) {
  if (!held_.has_value()) return;
  for (const v1::SequenceDelta& d : held_->chunk().deltas()) {
    if (d.token_ids_size() > 0) sent_tokens_ = true;
  }
  messages->push_back(std::move(*held_));
  held_.reset();
}

std::vector<v1::GenerateResponse> RequestStream::Fail(const std::string& message) {
  for (SequenceState& s : sequences_) {
    if (s.reason == FinishReason::kNone) {
      s.reason = FinishReason::kError;
      s.error = message;
    }
  }
  std::vector<v1::GenerateResponse> messages;
  Release(&messages);
  messages.push_back(MakeFinished(nullptr));
  return messages;
}

v1::GenerateResponse RequestStream::MakeFinished(const RequestOutput* output) {
  finished_ = true;
  v1::GenerateResponse msg;
  msg.set_request_id(request_id_);
  v1::Finished* finished = msg.mutable_finished();
  uint32_t completion_tokens = 0;
  for (size_t i = 0; i < sequences_.size(); ++i) {
    SequenceState& s = sequences_[i];
    if (s.reason == FinishReason::kNone) {
      // The scheduler ended the request without finishing this sequence.
      const bool failed = output != nullptr && !output->error.empty();
      s.reason = failed ? FinishReason::kError : FinishReason::kAbort;
      if (failed) s.error = output->error;
    }
    if (s.reason == FinishReason::kError && s.error.empty() && output != nullptr) {
      s.error = output->error;  // the scheduler ended it with an error (a lost worker)
    }
    v1::SequenceFinish* f = finished->add_sequences();
    f->set_index(static_cast<uint32_t>(i));
    f->set_reason(ToProtoFinishReason(s.reason));
    if (s.reason == FinishReason::kError) {
      f->set_error_message(s.error);
    } else if (s.reason == FinishReason::kLength && output != nullptr && !output->error.empty()) {
      f->set_error_message(output->error);  // cut short: the KV cache could not hold it
    }
    if (s.reason == FinishReason::kStop) {
      if (s.text != nullptr && s.text->stopped()) {
        f->set_stop_string(s.text->matched_stop());
      } else if (s.stop_token.has_value()) {
        f->set_stop_token_id(*s.stop_token);
      }
    }
    f->set_cumulative_logprob(static_cast<float>(s.cumulative_logprob));
    completion_tokens += static_cast<uint32_t>(s.num_tokens);
  }
  v1::Usage* usage = finished->mutable_usage();
  usage->set_prompt_tokens(num_prompt_tokens_);
  if (output != nullptr) {
    usage->set_cached_prompt_tokens(static_cast<uint32_t>(output->num_cached_prompt_tokens));
  }
  usage->set_completion_tokens(completion_tokens);
  return msg;
}

}  // namespace folio
