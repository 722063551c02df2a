#ifndef FOLIO_SCHEDULER_SERVER_GENERATION_SERVICE_H_
#define FOLIO_SCHEDULER_SERVER_GENERATION_SERVICE_H_

#include <atomic>

#include "folio/v1/generation.grpc.pb.h"
#include "scheduler/server/api_key_auth.h"
#include "scheduler/server/engine.h"

namespace folio {

// folio.v1.Generation over the engine, on gRPC's callback API: handlers
// validate, enqueue and return; token streams are written by reactors fed
// from the engine thread, which never waits for a client. A cancelled call
// aborts its request.
//
// With an API key (`auth`), every call is checked first and refused with
// UNAUTHENTICATED without the key (api_key_auth.h); the other services of
// the server are not this class's business and stay open.
//
// Thread-safe. Until set_engine(), every call answers UNAVAILABLE (the
// server is up before its workers are); the engine must outlive its use.
class GenerationService final : public v1::Generation::CallbackService {
 public:
  explicit GenerationService(Engine* engine = nullptr, ApiKeyAuth auth = ApiKeyAuth())
      : auth_(std::move(auth)), engine_(engine) {}
  void set_engine(Engine* engine) { engine_.store(engine); }

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* context,
                                  const v1::AbortRequest* request,
                                  v1::AbortResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* response) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* context,
                                       const v1::DetokenizeRequest* request,
                                       v1::DetokenizeResponse* response) override;

 private:
  const ApiKeyAuth auth_;
  std::atomic<Engine*> engine_;
};

// absl::Status -> grpc::Status, keeping code and message.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace folio

#endif  // FOLIO_SCHEDULER_SERVER_GENERATION_SERVICE_H_
