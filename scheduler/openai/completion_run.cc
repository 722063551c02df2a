#include "scheduler/openai/completion_run.h"

#include "absl/strings/str_cat.h"
#include "common/json_text.h"

namespace folio {
namespace {

using Json = nlohmann::ordered_json;

// Characters as Python counts them (code points), for text_offset.
int64_t CodePoints(std::string_view s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

Json Bytes(std::string_view s) {
  Json out = Json::array();
  for (unsigned char c : s) out.push_back(static_cast<int>(c));
  return out;
}

// OpenAI's legacy logprobs object of /v1/completions, with no token yet.
Json EmptyCompletionLogprobs() {
  return {{"tokens", Json::array()},
          {"token_logprobs", Json::array()},
          {"top_logprobs", Json::array()},
          {"text_offset", Json::array()}};
}

const char* OpenAiFinishReason(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_ABORT:
      return "abort";
    default:
      return "stop";
  }
}

}  // namespace

class CompletionRun::Sink final : public GenerateSink {
 public:
  Sink(std::shared_ptr<CompletionRun> run, int32_t prompt) : run_(std::move(run)), prompt_(prompt) {}
  void OnResponse(v1::GenerateResponse response) override {
    run_->OnResponse(prompt_, std::move(response));
  }
  void OnError(absl::Status status) override { run_->OnError(prompt_, std::move(status)); }

 private:
  const std::shared_ptr<CompletionRun> run_;
  const int32_t prompt_;
};

CompletionRun::CompletionRun(Options options, const Tokenizer& tokenizer,
                             std::shared_ptr<HttpExchange> exchange,
                             std::function<void(const std::string&)> abort,
                             std::function<void(int)> on_status)
    : options_(std::move(options)),
      tokenizer_(tokenizer),
      exchange_(std::move(exchange)),
      abort_(std::move(abort)),
      on_status_(std::move(on_status)),
      choices_(static_cast<size_t>(options_.num_prompts) * options_.n),
      prompt_logprobs_(options_.num_prompts),
      prompt_done_(options_.num_prompts, false) {}

std::shared_ptr<GenerateSink> CompletionRun::SinkFor(int32_t index) {
  return std::make_shared<Sink>(shared_from_this(), index);
}

void CompletionRun::Started(std::vector<std::string> engine_ids) {
  std::vector<std::string> to_abort;
  {
    std::lock_guard<std::mutex> lock(mu_);
    engine_ids_ = std::move(engine_ids);
    if (gone_) {
      to_abort = engine_ids_;
    } else {
      started_ = true;
      if (options_.stream) {
        on_status_(200);
        exchange_->StartStream(200, "text/event-stream");
        if (options_.chat) {  // the role comes first, as OpenAI sends it
          for (size_t i = 0; i < choices_.size(); ++i) {
            Json event = Envelope();
            event["choices"] = Json::array({Json{{"index", i},
                                                 {"delta", {{"role", "assistant"}, {"content", ""}}},
                                                 {"logprobs", nullptr},
                                                 {"finish_reason", nullptr}}});
            SendEvent(event);
          }
        }
      }
      for (const Pending& p : pending_) Handle(p);
      pending_.clear();
    }
  }
  for (const std::string& id : to_abort) abort_(id);
}

void CompletionRun::Refused(std::vector<std::string> submitted_ids, const OpenAiError& error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    pending_.clear();
    on_status_(error.status);
    exchange_->Respond(error.status, "application/json", error.ToJson());
  }
  for (const std::string& id : submitted_ids) abort_(id);
}

void CompletionRun::ClientGone() {
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    gone_ = true;
    if (done_) return;
    done_ = true;
    ids = engine_ids_;
  }
  for (const std::string& id : ids) abort_(id);
}

void CompletionRun::OnResponse(int32_t prompt, v1::GenerateResponse response) {
  std::lock_guard<std::mutex> lock(mu_);
  if (done_) return;
  if (!started_) {
    pending_.push_back({prompt, std::move(response), absl::OkStatus()});
    return;
  }
  Handle({prompt, std::move(response), absl::OkStatus()});
}

void CompletionRun::OnError(int32_t prompt, absl::Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (done_) return;
  if (!started_) {
    pending_.push_back({prompt, std::nullopt, std::move(status)});
    return;
  }
  Handle({prompt, std::nullopt, std::move(status)});
}

void CompletionRun::Handle(const Pending& p) {
  if (done_) return;
  if (!p.response.has_value()) return Fail(FromStatus(p.error));
  if (p.response->has_chunk()) HandleChunk(p.prompt, p.response->chunk());
  if (p.response->has_finished()) HandleFinished(p.prompt, p.response->finished());
}

std::string CompletionRun::TokenText(int32_t id) const {
  const TokenId ids[] = {id};
  return tokenizer_.Decode(ids, /*skip_special_tokens=*/false);
}

CompletionRun::Piece CompletionRun::EchoPiece(int32_t prompt, int64_t* text_offset) {
  Piece piece;
  piece.text = options_.echo_texts[prompt];
  *text_offset = CodePoints(piece.text);
  if (!options_.logprobs.has_value()) return piece;
  // The prompt's tokens: the first has no log-prob (nothing before it).
  piece.logprobs = EmptyCompletionLogprobs();
  const std::vector<int32_t>& ids = options_.echo_ids[prompt];
  const std::vector<v1::TokenLogprob>& scored = prompt_logprobs_[prompt];
  int64_t offset = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string token = TokenText(ids[i]);
    piece.logprobs["tokens"].push_back(token);
    piece.logprobs["text_offset"].push_back(offset);
    offset += CodePoints(token);
    const v1::TokenLogprob* lp = i >= 1 && i - 1 < scored.size() ? &scored[i - 1] : nullptr;
    if (lp == nullptr) {
      piece.logprobs["token_logprobs"].push_back(nullptr);
      piece.logprobs["top_logprobs"].push_back(nullptr);
      continue;
    }
    piece.logprobs["token_logprobs"].push_back(lp->logprob());
    piece.logprobs["top_logprobs"].push_back(TopLogprobsByText(*lp));
  }
  // The tokens' own texts (BOS included) count, as for the tokens that follow.
  *text_offset = offset;
  return piece;
}

Json CompletionRun::TopLogprobsByText(const v1::TokenLogprob& lp) const {
  Json top = Json::object();
  for (const v1::TopLogprob& t : lp.top_logprobs()) top[TokenText(t.token_id())] = t.logprob();
  return top;
}

Json CompletionRun::VllmPromptLogprobs(int32_t prompt) const {
  Json list = Json::array({nullptr});  // the first token has nothing before it
  for (const v1::TokenLogprob& lp : prompt_logprobs_[prompt]) {
    Json entry = Json::object();
    entry[absl::StrCat(lp.token_id())] = {{"logprob", lp.logprob()},
                                          {"decoded_token", TokenText(lp.token_id())}};
    for (const v1::TopLogprob& t : lp.top_logprobs()) {
      const std::string key = absl::StrCat(t.token_id());
      if (!entry.contains(key)) {
        entry[key] = {{"logprob", t.logprob()}, {"decoded_token", TokenText(t.token_id())}};
      }
    }
    list.push_back(std::move(entry));
  }
  return list;
}

void CompletionRun::AppendLogprobs(Choice& choice, const v1::SequenceDelta& delta, Json* out) {
  if (options_.chat) {
    if (out->is_null()) *out = {{"content", Json::array()}};
    for (const v1::TokenLogprob& lp : delta.logprobs()) {
      const std::string token = TokenText(lp.token_id());
      Json top = Json::array();
      for (const v1::TopLogprob& t : lp.top_logprobs()) {
        const std::string alt = TokenText(t.token_id());
        top.push_back({{"token", alt}, {"logprob", t.logprob()}, {"bytes", Bytes(alt)}});
      }
      (*out)["content"].push_back(
          {{"token", token}, {"logprob", lp.logprob()}, {"bytes", Bytes(token)}, {"top_logprobs", top}});
    }
    return;
  }
  if (out->is_null()) *out = EmptyCompletionLogprobs();
  for (const v1::TokenLogprob& lp : delta.logprobs()) {
    const std::string token = TokenText(lp.token_id());
    (*out)["tokens"].push_back(token);
    (*out)["token_logprobs"].push_back(lp.logprob());
    (*out)["top_logprobs"].push_back(TopLogprobsByText(lp));
    (*out)["text_offset"].push_back(choice.text_offset);
    choice.text_offset += CodePoints(token);
  }
}

void CompletionRun::HandleChunk(int32_t prompt, const v1::Chunk& chunk) {
  for (const v1::TokenLogprob& lp : chunk.prompt_logprobs()) prompt_logprobs_[prompt].push_back(lp);
  for (const v1::SequenceDelta& delta : chunk.deltas()) {
    const int32_t index = prompt * options_.n + static_cast<int32_t>(delta.index());
    if (index < 0 || index >= static_cast<int32_t>(choices_.size())) continue;
    Choice& choice = choices_[index];
    Piece piece;
    if (options_.echo && !choice.echoed) {
      piece = EchoPiece(prompt, &choice.text_offset);
      choice.echoed = true;
    }
    piece.text += delta.text();
    if (options_.logprobs.has_value()) AppendLogprobs(choice, delta, &piece.logprobs);
    if (options_.stream) {
      if (!piece.text.empty() || delta.logprobs_size() > 0) Emit(index, piece);
    } else {
      choice.text += piece.text;
      if (!piece.logprobs.is_null()) {
        if (choice.logprobs.is_null()) {
          choice.logprobs = std::move(piece.logprobs);
        } else {
          for (auto& [key, values] : piece.logprobs.items()) {
            for (auto& v : values) choice.logprobs[key].push_back(std::move(v));
          }
        }
      }
    }
  }
}

void CompletionRun::HandleFinished(int32_t prompt, const v1::Finished& finished) {
  if (prompt_done_[prompt]) return;
  prompt_done_[prompt] = true;
  ++prompts_done_;
  prompt_tokens_ += finished.usage().prompt_tokens();
  completion_tokens_ += finished.usage().completion_tokens();
  cached_tokens_ += finished.usage().cached_prompt_tokens();
  for (const v1::SequenceFinish& s : finished.sequences()) {
    if (s.reason() == v1::FINISH_REASON_ERROR) {
      OpenAiError e;
      e.status = 500;
      e.type = "server_error";
      e.message = s.error_message().empty() ? "the request failed" : s.error_message();
      return Fail(e);
    }
  }
  for (const v1::SequenceFinish& s : finished.sequences()) {
    const int32_t index = prompt * options_.n + static_cast<int32_t>(s.index());
    if (index < 0 || index >= static_cast<int32_t>(choices_.size())) continue;
    Choice& choice = choices_[index];
    choice.finish_reason = OpenAiFinishReason(s.reason());
    if (s.has_stop_string()) {
      choice.stop_reason = s.stop_string();
    } else if (s.has_stop_token_id() && s.reason() == v1::FINISH_REASON_STOP) {
      choice.stop_reason = s.stop_token_id();
    }
    if (options_.echo && !choice.echoed) {  // nothing was generated: the echo alone
      Piece piece = EchoPiece(prompt, &choice.text_offset);
      choice.echoed = true;
      if (options_.stream) {
        Emit(index, piece);
      } else {
        choice.text += piece.text;
        if (!piece.logprobs.is_null()) choice.logprobs = std::move(piece.logprobs);
      }
    }
    if (options_.stream) EmitFinish(index);
  }
  if (prompts_done_ == options_.num_prompts) Complete();
}

Json CompletionRun::Envelope() const {
  return Json{{"id", options_.id},
              {"object", options_.chat ? (options_.stream ? "chat.completion.chunk" : "chat.completion")
                                       : "text_completion"},
              {"created", options_.created},
              {"model", options_.model}};
}

Json CompletionRun::UsageJson() const {
  return Json{{"prompt_tokens", prompt_tokens_},
              {"completion_tokens", completion_tokens_},
              {"total_tokens", prompt_tokens_ + completion_tokens_},
              {"prompt_tokens_details", {{"cached_tokens", cached_tokens_}}}};
}

void CompletionRun::SendEvent(const Json& event) {
  exchange_->Send(absl::StrCat("data: ", JsonText(event), "\n\n"));
}

void CompletionRun::Emit(int32_t index, const Piece& piece) {
  Json event = Envelope();
  Json c = {{"index", index}};
  if (options_.chat) {
    c["delta"] = {{"content", piece.text}};
  } else {
    c["text"] = piece.text;
  }
  c["logprobs"] = piece.logprobs;
  c["finish_reason"] = nullptr;
  event["choices"] = Json::array({std::move(c)});
  if (options_.include_usage) event["usage"] = nullptr;
  SendEvent(event);
}

void CompletionRun::EmitFinish(int32_t index) {
  const Choice& choice = choices_[index];
  Json event = Envelope();
  Json c = {{"index", index}};
  if (options_.chat) {
    c["delta"] = Json::object();
  } else {
    c["text"] = "";
  }
  c["logprobs"] = nullptr;
  c["finish_reason"] = choice.finish_reason;
  c["stop_reason"] = choice.stop_reason;
  event["choices"] = Json::array({std::move(c)});
  if (options_.include_usage) event["usage"] = nullptr;
  SendEvent(event);
}

void CompletionRun::Fail(const OpenAiError& error) {
  done_ = true;
  if (options_.stream && started_) {
    exchange_->Send(absl::StrCat("data: ", error.ToJson(), "\n\n"));
    exchange_->End();
  } else {
    on_status_(error.status);
    exchange_->Respond(error.status, "application/json", error.ToJson());
  }
  // The other prompts' requests are no longer wanted.
  for (size_t i = 0; i < engine_ids_.size(); ++i) {
    if (!prompt_done_[i]) abort_(engine_ids_[i]);
  }
}

void CompletionRun::Complete() {
  done_ = true;
  if (options_.stream) {
    if (options_.include_usage) {
      Json event = Envelope();
      event["choices"] = Json::array();
      event["usage"] = UsageJson();
      SendEvent(event);
    }
    exchange_->Send("data: [DONE]\n\n");
    exchange_->End();
    return;
  }
  Json body = Envelope();
  body["choices"] = Json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice& choice = choices_[i];
    Json c = {{"index", i}};
    if (options_.chat) {
      c["message"] = {{"role", "assistant"}, {"content", choice.text}};
    } else {
      c["text"] = choice.text;
    }
    c["logprobs"] = choice.logprobs;
    c["finish_reason"] = choice.finish_reason;
    c["stop_reason"] = choice.stop_reason;
    const int32_t prompt = static_cast<int32_t>(i) / options_.n;
    if (!prompt_logprobs_[prompt].empty()) c["prompt_logprobs"] = VllmPromptLogprobs(prompt);
    body["choices"].push_back(std::move(c));
  }
  body["usage"] = UsageJson();
  on_status_(200);
  exchange_->Respond(200, "application/json", JsonText(body));
}

}  // namespace folio
