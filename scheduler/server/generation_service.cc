#include "scheduler/server/generation_service.h"

#include <deque>
#include <memory>
#include <mutex>

namespace folio {
namespace {

// One Generate call. The engine feeds it through a GenerateSink; gRPC calls
// OnWriteDone / OnCancel / OnDone. Writes go out one at a time from a queue.
// The shared State outlives the reactor: the engine may still hold the sink
// after the client has gone.
class GenerateReactor final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  // What to do next, decided under the lock and done outside it (a reaction
  // such as OnDone may run inline and take the lock itself).
  struct Action {
    GenerateReactor* reactor = nullptr;
    const v1::GenerateResponse* write = nullptr;  // StartWrite this
    bool finish = false;                          // or Finish with status
    grpc::Status status;

    void Run() const {
      if (reactor == nullptr) return;
      if (write != nullptr) reactor->StartWrite(write);
      if (finish) reactor->Finish(status);
    }
  };

  struct State : public GenerateSink {
    std::mutex mu;
    GenerateReactor* reactor = nullptr;  // null once finishing is under way
    std::deque<v1::GenerateResponse> queue;  // front() is being written
    bool writing = false;
    bool finishing = false;  // the last message is queued or the call failed
    grpc::Status final_status;

    void OnResponse(v1::GenerateResponse response) override {
      Action action;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (reactor == nullptr || finishing) return;
        finishing = response.has_finished();
        queue.push_back(std::move(response));
        action = NextLocked();
      }
      action.Run();
    }
    void OnError(absl::Status status) override {
      Action action;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (reactor == nullptr || finishing) return;
        finishing = true;
        final_status = ToGrpcStatus(status);
        action = NextLocked();
      }
      action.Run();
    }
    // The next write, or Finish once the queue is drained. Deque elements
    // keep their address while others are pushed, so front() may be
    // written outside the lock.
    Action NextLocked() {
      Action action;
      if (writing || reactor == nullptr) return action;
      action.reactor = reactor;
      if (!queue.empty()) {
        writing = true;
        action.write = &queue.front();
      } else if (finishing) {
        reactor = nullptr;  // Finish is the last call
        action.finish = true;
        action.status = final_status;
      } else {
        action.reactor = nullptr;
      }
      return action;
    }
  };

  GenerateReactor(Engine& engine, const v1::GenerateRequest& request)
      : engine_(engine), state_(std::make_shared<State>()) {
    state_->reactor = this;
    absl::StatusOr<std::string> id = engine_.Submit(request, state_);
    if (!id.ok()) {
      {
        std::lock_guard<std::mutex> lock(state_->mu);
        state_->reactor = nullptr;
      }
      Finish(ToGrpcStatus(id.status()));
      return;
    }
    request_id_ = *id;
  }

  void OnWriteDone(bool ok) override {
    Action action;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->writing = false;
      if (!state_->queue.empty()) state_->queue.pop_front();
      if (ok) {
        action = state_->NextLocked();
      } else if (state_->reactor != nullptr) {
        // The stream broke (client gone): no more writes; OnCancel aborts.
        state_->queue.clear();
        state_->reactor = nullptr;
        action.reactor = this;
        action.finish = true;
        action.status = grpc::Status(grpc::StatusCode::CANCELLED, "stream closed");
      }
    }
    action.Run();
  }

  void OnCancel() override {
    if (!request_id_.empty()) engine_.Abort(request_id_);
  }

  void OnDone() override {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->reactor = nullptr;
    }
    delete this;
  }

 private:
  Engine& engine_;
  std::shared_ptr<State> state_;
  std::string request_id_;
};

grpc::Status NotReady() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the model is still loading");
}

grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context, grpc::Status status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(std::move(status));
  return reactor;
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

grpc::ServerWriteReactor<v1::GenerateResponse>* GenerationService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  // A reactor that only finishes: a call refused before it starts.
  class Refused final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
   public:
    explicit Refused(const grpc::Status& status) { Finish(status); }
    void OnDone() override { delete this; }
  };
  if (grpc::Status allowed = auth_.Check(*context); !allowed.ok()) return new Refused(allowed);
  Engine* engine = engine_.load();
  if (engine == nullptr) return new Refused(NotReady());  // not serving the model yet
  return new GenerateReactor(*engine, *request);
}

grpc::ServerUnaryReactor* GenerationService::Abort(grpc::CallbackServerContext* context,
                                                   const v1::AbortRequest* request,
                                                   v1::AbortResponse* response) {
  if (grpc::Status allowed = auth_.Check(*context); !allowed.ok()) {
    return FinishUnary(context, allowed);
  }
  if (request->request_id().empty()) {
    return FinishUnary(context, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                             "request_id must not be empty"));
  }
  Engine* engine = engine_.load();
  if (engine == nullptr) return FinishUnary(context, NotReady());
  response->set_found(engine->Abort(request->request_id()));
  return FinishUnary(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* context,
                                                          const v1::GetModelInfoRequest* request,
                                                          v1::ModelInfo* response) {
  (void)request;
  if (grpc::Status allowed = auth_.Check(*context); !allowed.ok()) {
    return FinishUnary(context, allowed);
  }
  Engine* engine = engine_.load();
  if (engine == nullptr) return FinishUnary(context, NotReady());
  *response = engine->ModelInfo();
  return FinishUnary(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* context,
                                                      const v1::TokenizeRequest* request,
                                                      v1::TokenizeResponse* response) {
  if (grpc::Status allowed = auth_.Check(*context); !allowed.ok()) {
    return FinishUnary(context, allowed);
  }
  Engine* engine = engine_.load();
  if (engine == nullptr) return FinishUnary(context, NotReady());
  const bool add_special = !request->has_add_special_tokens() || request->add_special_tokens();
  for (TokenId id : engine->Tokenize(request->text(), add_special)) response->add_token_ids(id);
  return FinishUnary(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* GenerationService::Detokenize(grpc::CallbackServerContext* context,
                                                        const v1::DetokenizeRequest* request,
                                                        v1::DetokenizeResponse* response) {
  if (grpc::Status allowed = auth_.Check(*context); !allowed.ok()) {
    return FinishUnary(context, allowed);
  }
  Engine* engine = engine_.load();
  if (engine == nullptr) return FinishUnary(context, NotReady());
  const std::vector<TokenId> ids(request->token_ids().begin(), request->token_ids().end());
  const bool skip_special = !request->has_skip_special_tokens() || request->skip_special_tokens();
  absl::StatusOr<std::string> text = engine->Detokenize(ids, skip_special);
  if (!text.ok()) return FinishUnary(context, ToGrpcStatus(text.status()));
  response->set_text(std::move(*text));
  return FinishUnary(context, grpc::Status::OK);
}

}  // namespace folio
