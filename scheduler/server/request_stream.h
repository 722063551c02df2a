#ifndef FOLIO_SCHEDULER_SERVER_REQUEST_STREAM_H_
#define FOLIO_SCHEDULER_SERVER_REQUEST_STREAM_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/tokenizer.h"
#include "folio/v1/generation.pb.h"
#include "scheduler/request_output.h"
#include "scheduler/server/generate_request.h"
#include "scheduler/server/sequence_text.h"

namespace folio {

// The client-facing view of one request: turns the scheduler's outputs into
// Generate stream messages. It detokenizes, matches stop strings (a sequence
// that hits one is finished here, its later tokens dropped), attaches
// log-probs when asked, and writes the final Finished message with usage.
//
// With a stream interval N > 1 (folio-scheduler --stream-interval, as vLLM's)
// the chunks of later steps are held and merged until some sequence has N
// tokens waiting, a sequence ends or the request finishes; the first chunk
// goes out at once (time to first token is unchanged). Fewer, larger
// messages cost the server and the clients less per token.
//
// Thread-compatible (the engine thread owns it); the tokenizer must outlive it.
class RequestStream {
 public:
  RequestStream(std::string request_id, const Tokenizer& tokenizer, const ParsedRequest& request,
                int32_t stream_interval = 1);

  // What stop strings ended in one Consume while the scheduler still runs
  // the sequences: every sequence (the engine then aborts the request; its
  // final output carries nothing new), or these output indices (the engine
  // stops them in the scheduler, Scheduler::StopSequence, to free them).
  struct Stopped {
    bool request = false;
    std::vector<int32_t> sequences;
  };

  // The messages for one output: a chunk when something changed, then
  // Finished when the request is done.
  std::vector<v1::GenerateResponse> Consume(const RequestOutput& output, Stopped* stopped);

  // The last messages of a request that failed outside the scheduler: a
  // held chunk, if any, then Finished.
  std::vector<v1::GenerateResponse> Fail(const std::string& message);

  const std::string& request_id() const { return request_id_; }
  bool finished() const { return finished_; }
  // The first sequence's finish reason once finished(); kNone before.
  FinishReason finish_reason() const {
    return sequences_.empty() ? FinishReason::kNone : sequences_[0].reason;
  }

  // When things happened to this request, for the latency metrics (steady
  // clock, nanoseconds); kept by the engine.
  struct Timing {
    int64_t submit_ns = 0;
    int64_t last_output_ns = -1;  // -1 until a token was delivered
    bool scheduled = false;       // its first step has been planned
  };
  Timing& timing() { return timing_; }

 private:
  struct SequenceState {
    std::unique_ptr<SequenceText> text;
    FinishReason reason = FinishReason::kNone;
    std::string error;
    std::optional<TokenId> stop_token;
    TokenId last_token = -1;
    int32_t num_tokens = 0;
    double cumulative_logprob = 0.0;
  };

  // Appends one delta's effect to `chunk`; false when nothing changed.
  bool ApplyDelta(const SequenceOutput& delta, v1::SequenceDelta* out);
  // Adds `chunk` to the held one; true when the held chunk is due (see the
  // class comment).
  bool Hold(v1::GenerateResponse chunk);
  // Appends the held chunk, if any, to `messages`.
  void Release(std::vector<v1::GenerateResponse>* messages);
  v1::GenerateResponse MakeFinished(const RequestOutput* output);
  SequenceState& StateFor(int32_t index);

  const std::string request_id_;
  const Tokenizer& tokenizer_;
  const std::vector<std::string> stop_strings_;
  const TextOptions text_options_;
  const std::optional<int32_t> logprobs_;
  const uint32_t num_prompt_tokens_;
  const int32_t stream_interval_;
  std::vector<SequenceState> sequences_;  // by output index
  std::optional<v1::GenerateResponse> held_;  // chunks not yet sent (stream_interval_ > 1)
  bool sent_tokens_ = false;                  // a chunk with tokens has gone out
  bool finished_ = false;
  Timing timing_;
};

// The public enum value of a finish reason.
v1::FinishReason ToProtoFinishReason(FinishReason reason);

}  // namespace folio

#endif  // FOLIO_SCHEDULER_SERVER_REQUEST_STREAM_H_
