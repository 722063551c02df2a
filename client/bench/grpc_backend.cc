#include "client/bench/grpc_backend.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "folio/v1/generation.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace folio::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::string Describe(const grpc::Status& s) {
  return absl::StrCat("gRPC status ", static_cast<int>(s.error_code()), ": ", s.error_message());
}

class GrpcBackend : public Backend {
 public:
  explicit GrpcBackend(const BackendOptions& options)
      : options_(options),
        stub_(v1::Generation::NewStub(
            grpc::CreateChannel(options.address, grpc::InsecureChannelCredentials()))) {}

  absl::StatusOr<ServerInfo> Probe() override {
    grpc::ClientContext ctx;
    Prepare(ctx, 10);
    v1::ModelInfo info;
    grpc::Status s = stub_->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info);
    if (!s.ok()) return absl::UnavailableError(Describe(s));
    return ServerInfo{info.model_name(), static_cast<int32_t>(info.max_model_len()),
                      static_cast<int32_t>(info.vocab_size())};
  }

  RequestRecord Send(const BenchRequest& request, const std::string&) override {
    v1::GenerateRequest r;
    if (request.text.has_value()) {
      r.set_text(*request.text);
    } else {
      r.mutable_token_ids()->mutable_ids()->Add(request.prompt_token_ids.begin(),
                                                 request.prompt_token_ids.end());
    }
    v1::SamplingParams* sp = r.mutable_sampling_params();
    sp->set_max_tokens(static_cast<uint32_t>(request.output_len));
    sp->set_temperature(0);
    sp->set_ignore_eos(true);
    RequestRecord rec;
    grpc::ClientContext ctx;
    Prepare(ctx, options_.timeout_s);
    const Clock::time_point sent = Clock::now();
    auto reader = stub_->Generate(&ctx, r);
    v1::GenerateResponse response;
    v1::Finished finished;
    bool got_finished = false;
    int32_t streamed = 0;
    while (reader->Read(&response)) {
      if (response.has_finished()) {
        finished = response.finished();
        got_finished = true;
        continue;
      }
      const double t = SecondsSince(sent);
      for (const v1::SequenceDelta& d : response.chunk().deltas()) {
        for (int i = 0; i < d.token_ids_size(); ++i) rec.token_times.push_back(t);
        streamed += d.token_ids_size();
      }
    }
    grpc::Status s = reader->Finish();
    rec.e2e = SecondsSince(sent);
    if (!rec.token_times.empty()) rec.ttft = rec.token_times.front();
    rec.prompt_tokens = got_finished ? static_cast<int32_t>(finished.usage().prompt_tokens())
                                     : static_cast<int32_t>(request.prompt_token_ids.size());
    rec.output_tokens = streamed;
    if (!s.ok()) {
      rec.error = Describe(s);
    } else if (!got_finished) {
      rec.error = "the stream ended without Finished";
    } else {
      for (const v1::SequenceFinish& f : finished.sequences()) {
        if (f.reason() == v1::FINISH_REASON_ERROR || f.reason() == v1::FINISH_REASON_ABORT) {
          rec.error = absl::StrCat("sequence ", f.index(), " failed: ", f.error_message());
        }
      }
      if (rec.error.empty() && streamed == 0) rec.error = "no output token";
    }
    rec.success = rec.error.empty();
    return rec;
  }

 private:
  void Prepare(grpc::ClientContext& ctx, double timeout_s) const {
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
    if (!options_.api_key.empty()) ctx.AddMetadata("authorization", "Bearer " + options_.api_key);
  }

  const BackendOptions options_;
  const std::unique_ptr<v1::Generation::Stub> stub_;
};

}  // namespace

std::unique_ptr<Backend> NewGrpcBackend(const BackendOptions& options) {
  return std::make_unique<GrpcBackend>(options);
}

}  // namespace folio::bench
