// folio.v1.Generation on a real gRPC server (127.0.0.1, a free port) over
// the demo-model engine: streaming, bad input, client cancellation, Abort,
// GetModelInfo, Tokenize and Detokenize, and an engine that is not up yet.

#include "scheduler/server/generation_service.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server_test_util.h"

namespace folio {
namespace {

using ::testing::HasSubstr;
using namespace testing_util;

class GenerationServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = MakeDemoEngine();
    ASSERT_NE(engine_, nullptr);
    service_ = std::make_unique<GenerationService>(engine_.get());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    stub_ = v1::Generation::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(port_), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (engine_ != nullptr) engine_->Shutdown();
    if (server_ != nullptr) server_->Shutdown();
  }

  // Reads a whole stream; returns its status.
  grpc::Status ReadAll(const v1::GenerateRequest& request, std::vector<v1::GenerateResponse>* out) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    auto reader = stub_->Generate(&ctx, request);
    v1::GenerateResponse r;
    while (reader->Read(&r)) out->push_back(r);
    return reader->Finish();
  }

  void ExpectDrained() {
    ASSERT_TRUE(engine_->WaitIdle(absl::Seconds(60)));
    EXPECT_EQ(engine_->Snapshot().num_free_device_blocks, 256) << "KV blocks leaked";
  }

  std::unique_ptr<Engine> engine_;
  std::unique_ptr<GenerationService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Generation::Stub> stub_;
  int port_ = 0;
};

TEST_F(GenerationServiceTest, StreamsTheReferenceContinuation) {
  const ReferenceCase c = LoadReference()[2];
  std::vector<v1::GenerateResponse> stream;
  ASSERT_TRUE(ReadAll(GreedyRequest(c.prompt, 20), &stream).ok());
  ASSERT_GE(stream.size(), 2u);
  EXPECT_TRUE(stream.back().has_finished());
  for (size_t i = 0; i + 1 < stream.size(); ++i) EXPECT_TRUE(stream[i].has_chunk());
  v1::Usage usage;
  const std::vector<StreamedSequence> seqs = Reassemble(stream, &usage);
  ASSERT_EQ(seqs.size(), 1u);
  EXPECT_EQ(seqs[0].token_ids, std::vector<TokenId>(c.output_ids.begin(), c.output_ids.begin() + 20));
  EXPECT_EQ(usage.completion_tokens(), 20u);
  EXPECT_FALSE(stream[0].request_id().empty());
  ExpectDrained();
}

TEST_F(GenerationServiceTest, BadInputIsInvalidArgumentAndOthersKeepBeingServed) {
  v1::GenerateRequest bad = GreedyRequest("hello", 4);
  bad.mutable_sampling_params()->set_top_p(1.5f);
  std::vector<v1::GenerateResponse> stream;
  grpc::Status st = ReadAll(bad, &stream);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("sampling_params.top_p"));
  EXPECT_TRUE(stream.empty());

  v1::GenerateRequest no_prompt;
  stream.clear();
  st = ReadAll(no_prompt, &stream);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("prompt"));

  stream.clear();
  ASSERT_TRUE(ReadAll(GreedyRequest("And God", 5), &stream).ok());
  EXPECT_EQ(Reassemble(stream)[0].token_ids.size(), 5u);
  ExpectDrained();
}

TEST_F(GenerationServiceTest, ClientCancellationAbortsTheRequest) {
  grpc::ClientContext ctx;
  auto reader = stub_->Generate(&ctx, GreedyRequest("In the beginning", 2000));
  v1::GenerateResponse first;
  ASSERT_TRUE(reader->Read(&first));
  ASSERT_TRUE(first.has_chunk());
  ctx.TryCancel();
  v1::GenerateResponse r;
  while (reader->Read(&r)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ExpectDrained();  // the engine aborted it and freed its blocks
}

TEST_F(GenerationServiceTest, AbortByIdEndsTheStream) {
  v1::GenerateRequest r = GreedyRequest("In the beginning", 2000);
  r.set_request_id("to-abort");
  grpc::ClientContext ctx;
  auto reader = stub_->Generate(&ctx, r);
  v1::GenerateResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  EXPECT_EQ(msg.request_id(), "to-abort");

  grpc::ClientContext abort_ctx;
  v1::AbortRequest abort;
  abort.set_request_id("to-abort");
  v1::AbortResponse abort_response;
  ASSERT_TRUE(stub_->Abort(&abort_ctx, abort, &abort_response).ok());
  EXPECT_TRUE(abort_response.found());

  v1::GenerateResponse last;
  while (reader->Read(&msg)) last = msg;
  EXPECT_TRUE(reader->Finish().ok());
  ASSERT_TRUE(last.has_finished());
  EXPECT_EQ(last.finished().sequences(0).reason(), v1::FINISH_REASON_ABORT);

  grpc::ClientContext again_ctx;
  ASSERT_TRUE(stub_->Abort(&again_ctx, abort, &abort_response).ok());
  EXPECT_FALSE(abort_response.found());
  ExpectDrained();
}

TEST_F(GenerationServiceTest, ManyConcurrentStreamsAllComplete) {
  constexpr int kStreams = 24;
  std::vector<std::thread> clients;
  std::vector<std::vector<v1::GenerateResponse>> streams(kStreams);
  std::vector<grpc::Status> statuses(kStreams);
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&, i] {
      v1::GenerateRequest r = GreedyRequest(i % 2 ? "And God said" : "In the beginning", 4 + i % 9);
      if (i % 3 == 0) {
        r.mutable_sampling_params()->set_n(2);
        r.mutable_sampling_params()->set_temperature(0.7f);
        r.mutable_sampling_params()->set_seed(i);
      }
      statuses[i] = ReadAll(r, &streams[i]);
    });
  }
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << statuses[i].error_message();
    const std::vector<StreamedSequence> seqs = Reassemble(streams[i]);
    ASSERT_EQ(seqs.size(), i % 3 == 0 ? 2u : 1u);
    for (const StreamedSequence& s : seqs) EXPECT_EQ(s.token_ids.size(), static_cast<size_t>(4 + i % 9));
  }
  ExpectDrained();
}

TEST_F(GenerationServiceTest, ModelInfoAndTokenize) {
  grpc::ClientContext ctx;
  v1::ModelInfo info;
  ASSERT_TRUE(stub_->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.model_name(), "folio-demo");
  EXPECT_EQ(info.block_size(), 16u);
  EXPECT_EQ(info.num_device_blocks(), 256u);
  EXPECT_EQ(info.kv_token_capacity(), 256u * 16u);
  EXPECT_EQ(info.vocab_size(), 2048u);
  EXPECT_EQ(info.tensor_parallel_size(), 1u);
  EXPECT_TRUE(info.prefix_caching());
  EXPECT_FALSE(info.host_prefix_cache());  // not asked for
  EXPECT_EQ(info.kv_cache_dtype(), "float32");  // --kv-cache-dtype auto on the cpu

  const ReferenceCase c = LoadReference()[0];
  grpc::ClientContext tctx;
  v1::TokenizeRequest tr;
  tr.set_text(c.prompt);
  v1::TokenizeResponse tokens;
  ASSERT_TRUE(stub_->Tokenize(&tctx, tr, &tokens).ok());
  EXPECT_EQ(std::vector<TokenId>(tokens.token_ids().begin(), tokens.token_ids().end()), c.prompt_ids);
}

// Detokenize inverts Tokenize (the prompt's BOS is special: skipped unless
// asked for) and names an id outside the vocabulary.
TEST_F(GenerationServiceTest, DetokenizeInvertsTokenize) {
  const ReferenceCase c = LoadReference()[0];
  v1::DetokenizeRequest dr;
  for (TokenId id : c.prompt_ids) dr.add_token_ids(id);
  grpc::ClientContext ctx;
  v1::DetokenizeResponse text;
  ASSERT_TRUE(stub_->Detokenize(&ctx, dr, &text).ok());
  EXPECT_EQ(text.text(), c.prompt);
  dr.set_skip_special_tokens(false);
  grpc::ClientContext sctx;
  ASSERT_TRUE(stub_->Detokenize(&sctx, dr, &text).ok());
  EXPECT_EQ(text.text(), "<|begin_of_text|>" + c.prompt);

  dr.add_token_ids(2048);
  grpc::ClientContext bctx;
  const grpc::Status bad = stub_->Detokenize(&bctx, dr, &text);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(bad.error_message(),
            "token_ids[" + std::to_string(c.prompt_ids.size()) +
                "] is 2048, outside the vocabulary [0, 2048)");
}

TEST(GenerationServiceNotReadyTest, AnswersUnavailableUntilTheEngineIsSet) {
  GenerationService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  auto stub = v1::Generation::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  auto reader = stub->Generate(&ctx, GreedyRequest("x", 1));
  v1::GenerateResponse r;
  EXPECT_FALSE(reader->Read(&r));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  grpc::ClientContext ictx;
  v1::ModelInfo info;
  EXPECT_EQ(stub->GetModelInfo(&ictx, v1::GetModelInfoRequest(), &info).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  server->Shutdown();
}

}  // namespace
}  // namespace folio
