#ifndef FOLIO_SCHEDULER_OPENAI_COMPLETION_RUN_H_
#define FOLIO_SCHEDULER_OPENAI_COMPLETION_RUN_H_

// One /v1/completions or /v1/chat/completions request in flight: the engine
// streams of its prompts (one engine request per prompt, each with n
// sequences) turned into OpenAI's answer — server-sent events chunk by
// chunk when streaming, one JSON body at the end otherwise.
//
// Choice i*n + j is sequence j of prompt i (OpenAI's numbering). With
// `echo` a choice starts with its prompt (and, with logprobs, the prompt's
// log-probs). finish_reason: EOS and stop strings / stop tokens are "stop"
// (stop_reason says which string or token, null for EOS), max_tokens or
// the model's length "length", an abort (server shutdown) "abort"; a
// sequence that failed makes the whole answer an error (500, or an SSE
// error event when the stream has started).
//
// Thread-safe: sinks are called on the engine thread, the rest on I/O
// threads; everything takes the run's mutex and only enqueues output.

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/tokenizer.h"
#include "folio/v1/generation.pb.h"
#include "nlohmann/json.hpp"
#include "scheduler/openai/http_server.h"
#include "scheduler/openai/openai_error.h"
#include "scheduler/server/engine.h"

namespace folio {

class CompletionRun : public std::enable_shared_from_this<CompletionRun> {
 public:
  struct Options {
    bool chat = false;
    bool stream = false;
    bool include_usage = false;
    std::string id;  // "cmpl-…" / "chatcmpl-…"
    std::string model;
    int64_t created = 0;  // unix seconds
    int32_t num_prompts = 1;
    int32_t n = 1;  // choices per prompt
    std::optional<int32_t> logprobs;
    // Completions with echo: each prompt's text and ids (the ids give the
    // echoed log-probs their tokens).
    bool echo = false;
    std::vector<std::string> echo_texts;
    std::vector<std::vector<int32_t>> echo_ids;
  };
  // `abort` ends an engine request by id; `on_status` is told the HTTP
  // status once, when the answer's head goes out. The tokenizer must
  // outlive the run.
  CompletionRun(Options options, const Tokenizer& tokenizer,
                std::shared_ptr<HttpExchange> exchange,
                std::function<void(const std::string&)> abort,
                std::function<void(int)> on_status);
  CompletionRun(const CompletionRun&) = delete;
  CompletionRun& operator=(const CompletionRun&) = delete;

  // The sink of prompt `index`'s engine request.
  std::shared_ptr<GenerateSink> SinkFor(int32_t index);
  // Every prompt was submitted under these engine ids: output flows.
  void Started(std::vector<std::string> engine_ids);
  // A submit failed (the ids that were submitted are aborted): answer
  // `error` instead.
  void Refused(std::vector<std::string> submitted_ids, const OpenAiError& error);
  // The client went away: abort every engine request.
  void ClientGone();

 private:
  class Sink;
  struct Choice {
    std::string text;                   // non-streaming: everything so far
    nlohmann::ordered_json logprobs;   // non-streaming: the choice's logprobs object
    bool echoed = false;
    int64_t text_offset = 0;  // completions logprobs: characters so far
    std::string finish_reason;
    nlohmann::ordered_json stop_reason;
  };
  struct Pending {
    int32_t prompt;
    std::optional<v1::GenerateResponse> response;
    absl::Status error;
  };

  void OnResponse(int32_t prompt, v1::GenerateResponse response);
  void OnError(int32_t prompt, absl::Status status);
  void Handle(const Pending& p);  // REQUIRES: mu_ held
  void HandleChunk(int32_t prompt, const v1::Chunk& chunk);
  void HandleFinished(int32_t prompt, const v1::Finished& finished);
  // The echoed prompt of a choice's first output, and new tokens, as the
  // pieces of one streamed chunk or appended to the whole answer.
  struct Piece {
    std::string text;
    nlohmann::ordered_json logprobs;  // null when not asked for
  };
  // Sets *text_offset to where the tokens after the echo start.
  Piece EchoPiece(int32_t prompt, int64_t* text_offset);
  void AppendLogprobs(Choice& choice, const v1::SequenceDelta& delta, nlohmann::ordered_json* out);
  void Emit(int32_t index, const Piece& piece);
  void EmitFinish(int32_t index);
  void Fail(const OpenAiError& error);
  void Complete();
  nlohmann::ordered_json Envelope() const;
  nlohmann::ordered_json UsageJson() const;
  std::string TokenText(int32_t id) const;
  // A token's alternatives as the completions object keys them: {text: logprob}.
  nlohmann::ordered_json TopLogprobsByText(const v1::TokenLogprob& lp) const;
  // vLLM's `prompt_logprobs` of a choice: null, then {"id": {logprob, decoded_token}} per token.
  nlohmann::ordered_json VllmPromptLogprobs(int32_t prompt) const;
  void SendEvent(const nlohmann::ordered_json& event);

  const Options options_;
  const Tokenizer& tokenizer_;
  const std::shared_ptr<HttpExchange> exchange_;
  const std::function<void(const std::string&)> abort_;
  const std::function<void(int)> on_status_;

  std::mutex mu_;
  bool started_ = false;
  bool done_ = false;  // answered (or failed): later outputs are dropped
  bool gone_ = false;
  std::vector<std::string> engine_ids_;
  std::vector<Pending> pending_;  // outputs that came before Started
  std::vector<Choice> choices_;
  // Per prompt: its prompt log-probs (echo, prompt_logprobs), whether it finished.
  std::vector<std::vector<v1::TokenLogprob>> prompt_logprobs_;
  std::vector<bool> prompt_done_;
  int32_t prompts_done_ = 0;
  uint64_t prompt_tokens_ = 0, completion_tokens_ = 0, cached_tokens_ = 0;
};

}  // namespace folio

#endif  // FOLIO_SCHEDULER_OPENAI_COMPLETION_RUN_H_
