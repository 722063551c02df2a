// Checks that the generated protobuf and gRPC code for folio.v1 compiles,
// links and runs: messages survive a serialize/parse round trip, and a real
// server answers a real client over loopback TCP.

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "folio/v1/generation.grpc.pb.h"
#include "folio/v1/generation.pb.h"
#include "folio/v1/worker.grpc.pb.h"
#include "folio/v1/worker.pb.h"

namespace folio::v1 {
namespace {

template <typename T>
T RoundTrip(const T& in) {
  std::string wire;
  EXPECT_TRUE(in.SerializeToString(&wire));
  T out;
  EXPECT_TRUE(out.ParseFromString(wire));
  return out;
}

TEST(ProtoRoundTripTest, StepPlan) {
  StepPlan plan;
  plan.set_step_id(42);
  plan.set_num_scheduled_tokens(5);

  NewSequence* fresh = plan.add_new_sequences();
  fresh->set_seq_id(7);
  fresh->set_request_id(3);
  for (int32_t t : {1, 15043, 2787}) fresh->add_prompt_token_ids(t);
  fresh->add_output_token_ids(29889);
  for (int32_t b : {4, 9}) fresh->add_block_ids(b);
  fresh->set_num_computed_tokens(2);
  fresh->mutable_sampling()->set_temperature(0.7f);
  fresh->mutable_sampling()->set_top_k(40);
  fresh->mutable_sampling()->set_seed(1234);
  fresh->mutable_sampling()->add_stop_token_ids(2);

  CachedSequence* cached = plan.add_cached_sequences();
  cached->set_seq_id(5);
  cached->set_block_table_offset(3);
  cached->add_block_ids(11);
  cached->set_num_computed_tokens(48);

  ScheduledSequence* sched = plan.add_scheduled();
  sched->set_seq_id(7);
  sched->set_start_position(2);
  for (int32_t t : {2787, 29889}) sched->add_token_ids(t);
  sched->set_sample_mode(SAMPLE_MODE_BEAM_CANDIDATES);
  sched->set_num_samples(4);

  auto add_copy = [](BlockCopy* c, int32_t src, int32_t dst) {
    c->set_src(src);
    c->set_dst(dst);
  };
  add_copy(plan.add_swap_out(), 1, 100);
  add_copy(plan.add_swap_in(), 101, 2);
  add_copy(plan.add_copies(), 3, 12);
  plan.add_finished_seq_ids(8);
  plan.add_preempted_seq_ids(9);
  plan.add_preempted_seq_ids(10);

  const StepPlan got = RoundTrip(plan);
  EXPECT_EQ(got.step_id(), 42u);
  EXPECT_EQ(got.num_scheduled_tokens(), 5);

  ASSERT_EQ(got.new_sequences_size(), 1);
  const NewSequence& n = got.new_sequences(0);
  EXPECT_EQ(n.seq_id(), 7);
  EXPECT_EQ(n.request_id(), 3);
  EXPECT_EQ(std::vector<int32_t>(n.prompt_token_ids().begin(), n.prompt_token_ids().end()),
            (std::vector<int32_t>{1, 15043, 2787}));
  ASSERT_EQ(n.output_token_ids_size(), 1);
  EXPECT_EQ(n.output_token_ids(0), 29889);
  EXPECT_EQ(std::vector<int32_t>(n.block_ids().begin(), n.block_ids().end()),
            (std::vector<int32_t>{4, 9}));
  EXPECT_EQ(n.num_computed_tokens(), 2);
  EXPECT_FLOAT_EQ(n.sampling().temperature(), 0.7f);
  EXPECT_EQ(n.sampling().top_k(), 40);
  ASSERT_TRUE(n.sampling().has_seed());
  EXPECT_EQ(n.sampling().seed(), 1234u);
  ASSERT_EQ(n.sampling().stop_token_ids_size(), 1);
  EXPECT_EQ(n.sampling().stop_token_ids(0), 2);

  ASSERT_EQ(got.cached_sequences_size(), 1);
  EXPECT_EQ(got.cached_sequences(0).seq_id(), 5);
  EXPECT_EQ(got.cached_sequences(0).block_table_offset(), 3);
  ASSERT_EQ(got.cached_sequences(0).block_ids_size(), 1);
  EXPECT_EQ(got.cached_sequences(0).block_ids(0), 11);
  EXPECT_EQ(got.cached_sequences(0).num_computed_tokens(), 48);

  ASSERT_EQ(got.scheduled_size(), 1);
  EXPECT_EQ(got.scheduled(0).seq_id(), 7);
  EXPECT_EQ(got.scheduled(0).start_position(), 2);
  EXPECT_EQ(got.scheduled(0).token_ids_size(), 2);
  EXPECT_EQ(got.scheduled(0).sample_mode(), SAMPLE_MODE_BEAM_CANDIDATES);
  EXPECT_EQ(got.scheduled(0).num_samples(), 4);

  ASSERT_EQ(got.swap_out_size(), 1);
  EXPECT_EQ(got.swap_out(0).src(), 1);
  EXPECT_EQ(got.swap_out(0).dst(), 100);
  ASSERT_EQ(got.swap_in_size(), 1);
  EXPECT_EQ(got.swap_in(0).src(), 101);
  EXPECT_EQ(got.swap_in(0).dst(), 2);
  ASSERT_EQ(got.copies_size(), 1);
  EXPECT_EQ(got.copies(0).src(), 3);
  EXPECT_EQ(got.copies(0).dst(), 12);
  ASSERT_EQ(got.finished_seq_ids_size(), 1);
  EXPECT_EQ(got.finished_seq_ids(0), 8);
  ASSERT_EQ(got.preempted_seq_ids_size(), 2);
  EXPECT_EQ(got.preempted_seq_ids(1), 10);
}

TEST(ProtoRoundTripTest, StepResult) {
  StepResult result;
  result.set_step_id(42);
  result.set_rank(0);
  result.set_forward_seconds(0.012);
  result.set_allreduce_seconds(0.003);
  SequenceSamples* s = result.add_samples();
  s->set_seq_id(7);
  SampledToken* tok = s->add_tokens();
  tok->set_token_id(29889);
  tok->set_logprob(-0.25f);
  TokenProb* alt = tok->add_top_logprobs();
  alt->set_token_id(13);
  alt->set_logprob(-1.5f);
  result.mutable_status()->set_code(0);

  const StepResult got = RoundTrip(result);
  EXPECT_EQ(got.step_id(), 42u);
  EXPECT_DOUBLE_EQ(got.forward_seconds(), 0.012);
  EXPECT_DOUBLE_EQ(got.allreduce_seconds(), 0.003);
  ASSERT_EQ(got.samples_size(), 1);
  EXPECT_EQ(got.samples(0).seq_id(), 7);
  ASSERT_EQ(got.samples(0).tokens_size(), 1);
  EXPECT_EQ(got.samples(0).tokens(0).token_id(), 29889);
  EXPECT_FLOAT_EQ(got.samples(0).tokens(0).logprob(), -0.25f);
  ASSERT_EQ(got.samples(0).tokens(0).top_logprobs_size(), 1);
  EXPECT_EQ(got.samples(0).tokens(0).top_logprobs(0).token_id(), 13);
  EXPECT_TRUE(got.has_status());
  EXPECT_EQ(got.status().code(), 0);
}

TEST(ProtoRoundTripTest, GenerateRequest) {
  GenerateRequest req;
  req.set_request_id("req-1");
  req.set_text("Hello, folio");
  SamplingParams* sp = req.mutable_sampling_params();
  sp->set_temperature(0.0f);  // greedy: set to zero, which must stay distinguishable
  sp->set_top_k(50);
  sp->set_min_p(0.05f);
  sp->set_frequency_penalty(0.5f);
  sp->set_seed(99);
  sp->set_n(2);
  sp->set_best_of(4);
  sp->set_max_tokens(128);
  sp->add_stop("\n\n");
  sp->add_stop_token_ids(2);
  sp->set_ignore_eos(true);
  sp->set_logprobs(0);
  sp->set_priority(-1);
  sp->set_cache_salt("tenant-a");

  const GenerateRequest got = RoundTrip(req);
  ASSERT_TRUE(got.has_request_id());
  EXPECT_EQ(got.request_id(), "req-1");
  ASSERT_EQ(got.prompt_case(), GenerateRequest::kText);
  EXPECT_EQ(got.text(), "Hello, folio");
  const SamplingParams& p = got.sampling_params();
  ASSERT_TRUE(p.has_temperature());
  EXPECT_EQ(p.temperature(), 0.0f);
  EXPECT_FALSE(p.has_top_p());  // unset stays unset
  EXPECT_FALSE(p.has_repetition_penalty());
  EXPECT_EQ(p.top_k(), 50);
  EXPECT_FLOAT_EQ(p.min_p(), 0.05f);
  EXPECT_FLOAT_EQ(p.frequency_penalty(), 0.5f);
  ASSERT_TRUE(p.has_seed());
  EXPECT_EQ(p.seed(), 99u);
  EXPECT_EQ(p.n(), 2u);
  EXPECT_EQ(p.best_of(), 4u);
  ASSERT_TRUE(p.has_max_tokens());
  EXPECT_EQ(p.max_tokens(), 128u);
  ASSERT_EQ(p.stop_size(), 1);
  EXPECT_EQ(p.stop(0), "\n\n");
  ASSERT_EQ(p.stop_token_ids_size(), 1);
  EXPECT_EQ(p.stop_token_ids(0), 2);
  EXPECT_TRUE(p.ignore_eos());
  ASSERT_TRUE(p.has_logprobs());  // 0 = the sampled token's log-prob only
  EXPECT_EQ(p.logprobs(), 0u);
  EXPECT_EQ(p.priority(), -1);
  EXPECT_EQ(p.cache_salt(), "tenant-a");

  // The other prompt form, and no request id.
  GenerateRequest by_ids;
  for (int32_t t : {1, 2, 3}) by_ids.mutable_token_ids()->add_ids(t);
  const GenerateRequest got_ids = RoundTrip(by_ids);
  EXPECT_FALSE(got_ids.has_request_id());
  ASSERT_EQ(got_ids.prompt_case(), GenerateRequest::kTokenIds);
  EXPECT_EQ(got_ids.token_ids().ids_size(), 3);
  EXPECT_FALSE(got_ids.has_sampling_params());
}

TEST(ProtoRoundTripTest, GenerateResponse) {
  GenerateResponse chunk;
  chunk.set_request_id("req-1");
  SequenceDelta* d = chunk.mutable_chunk()->add_deltas();
  d->set_index(1);
  d->set_text(" wor");
  d->add_token_ids(1234);
  TokenLogprob* lp = d->add_logprobs();
  lp->set_token_id(1234);
  lp->set_logprob(-0.1f);
  TopLogprob* top = lp->add_top_logprobs();
  top->set_token_id(99);
  top->set_logprob(-2.0f);

  const GenerateResponse got_chunk = RoundTrip(chunk);
  ASSERT_EQ(got_chunk.kind_case(), GenerateResponse::kChunk);
  ASSERT_EQ(got_chunk.chunk().deltas_size(), 1);
  EXPECT_EQ(got_chunk.chunk().deltas(0).index(), 1u);
  EXPECT_EQ(got_chunk.chunk().deltas(0).text(), " wor");
  EXPECT_EQ(got_chunk.chunk().deltas(0).finish_reason(), FINISH_REASON_UNSPECIFIED);
  ASSERT_EQ(got_chunk.chunk().deltas(0).logprobs_size(), 1);
  EXPECT_EQ(got_chunk.chunk().deltas(0).logprobs(0).top_logprobs(0).token_id(), 99);

  GenerateResponse done;
  done.set_request_id("req-1");
  SequenceFinish* f0 = done.mutable_finished()->add_sequences();
  f0->set_index(0);
  f0->set_reason(FINISH_REASON_STOP);
  f0->set_stop_string("\n\n");
  SequenceFinish* f1 = done.mutable_finished()->add_sequences();
  f1->set_index(1);
  f1->set_reason(FINISH_REASON_ERROR);
  f1->set_error_message("worker 1 died");
  Usage* u = done.mutable_finished()->mutable_usage();
  u->set_prompt_tokens(12);
  u->set_completion_tokens(30);
  u->set_cached_prompt_tokens(8);

  const GenerateResponse got_done = RoundTrip(done);
  ASSERT_EQ(got_done.kind_case(), GenerateResponse::kFinished);
  const Finished& fin = got_done.finished();
  ASSERT_EQ(fin.sequences_size(), 2);
  EXPECT_EQ(fin.sequences(0).reason(), FINISH_REASON_STOP);
  ASSERT_EQ(fin.sequences(0).matched_stop_case(), SequenceFinish::kStopString);
  EXPECT_EQ(fin.sequences(0).stop_string(), "\n\n");
  EXPECT_EQ(fin.sequences(1).reason(), FINISH_REASON_ERROR);
  EXPECT_EQ(fin.sequences(1).error_message(), "worker 1 died");
  EXPECT_EQ(fin.usage().prompt_tokens(), 12u);
  EXPECT_EQ(fin.usage().completion_tokens(), 30u);
  EXPECT_EQ(fin.usage().cached_prompt_tokens(), 8u);
}

// A trivial Generation service: fixed model info, and a Generate stream of
// two chunks and Finished, written by a ServerWriteReactor.
class FakeGeneration final : public Generation::CallbackService {
 public:
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* ctx,
                                         const GetModelInfoRequest* /*req*/,
                                         ModelInfo* info) override {
    info->set_model_name("tiny-llama");
    info->set_max_model_len(2048);
    info->set_block_size(16);
    info->set_num_device_blocks(1000);
    info->set_num_host_blocks(250);
    info->set_kv_token_capacity(16000);
    info->set_tensor_parallel_size(2);
    info->set_vocab_size(32000);
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerWriteReactor<GenerateResponse>* Generate(grpc::CallbackServerContext* /*ctx*/,
                                                       const GenerateRequest* req) override {
    std::vector<GenerateResponse> msgs;
    for (const char* piece : {"Hello", " world"}) {
      GenerateResponse& m = msgs.emplace_back();
      m.set_request_id(req->request_id());
      SequenceDelta* d = m.mutable_chunk()->add_deltas();
      d->set_index(0);
      d->set_text(piece);
    }
    GenerateResponse& last = msgs.emplace_back();
    last.set_request_id(req->request_id());
    last.mutable_finished()->add_sequences()->set_reason(FINISH_REASON_LENGTH);
    last.mutable_finished()->mutable_usage()->set_completion_tokens(2);
    return new FixedStream(std::move(msgs));
  }

 private:
  // Writes the messages one at a time; deletes itself when the RPC is done.
  class FixedStream final : public grpc::ServerWriteReactor<GenerateResponse> {
   public:
    explicit FixedStream(std::vector<GenerateResponse> msgs) : msgs_(std::move(msgs)) {
      WriteNext();
    }
    void OnWriteDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
        return;
      }
      WriteNext();
    }
    void OnDone() override { delete this; }

   private:
    void WriteNext() {
      if (next_ < msgs_.size()) {
        StartWrite(&msgs_[next_++]);
      } else {
        Finish(grpc::Status::OK);
      }
    }
    std::vector<GenerateResponse> msgs_;
    size_t next_ = 0;
  };
};

class GenerationServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0) << "the OS did not assign a port";
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                   grpc::InsecureChannelCredentials());
    stub_ = Generation::NewStub(channel_);
  }

  void TearDown() override {
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
      server_->Wait();
    }
  }

  static void SetDeadline(grpc::ClientContext* ctx) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  }

  FakeGeneration service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Generation::Stub> stub_;
};

TEST_F(GenerationServerTest, GetModelInfoOverLoopback) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  ModelInfo info;
  const grpc::Status status = stub_->GetModelInfo(&ctx, GetModelInfoRequest(), &info);
  ASSERT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
  EXPECT_EQ(info.model_name(), "tiny-llama");
  EXPECT_EQ(info.max_model_len(), 2048u);
  EXPECT_EQ(info.block_size(), 16u);
  EXPECT_EQ(info.num_device_blocks(), 1000u);
  EXPECT_EQ(info.num_host_blocks(), 250u);
  EXPECT_EQ(info.kv_token_capacity(), 16000u);
  EXPECT_EQ(info.tensor_parallel_size(), 2u);
  EXPECT_EQ(info.vocab_size(), 32000u);
}

TEST_F(GenerationServerTest, GenerateStreamsChunksThenFinished) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  GenerateRequest req;
  req.set_request_id("r1");
  req.set_text("Hi");
  std::unique_ptr<grpc::ClientReader<GenerateResponse>> reader = stub_->Generate(&ctx, req);
  std::string text;
  int chunks = 0;
  bool finished = false;
  GenerateResponse msg;
  while (reader->Read(&msg)) {
    EXPECT_EQ(msg.request_id(), "r1");
    EXPECT_FALSE(finished) << "a message after Finished";
    if (msg.has_chunk()) {
      ++chunks;
      for (const SequenceDelta& d : msg.chunk().deltas()) text += d.text();
    } else if (msg.has_finished()) {
      finished = true;
      ASSERT_EQ(msg.finished().sequences_size(), 1);
      EXPECT_EQ(msg.finished().sequences(0).reason(), FINISH_REASON_LENGTH);
      EXPECT_EQ(msg.finished().usage().completion_tokens(), 2u);
    }
  }
  const grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
  EXPECT_EQ(chunks, 2);
  EXPECT_TRUE(finished);
  EXPECT_EQ(text, "Hello world");
}

// The Worker and Rendezvous stubs link and run too: this server hosts only
// Generation, so their calls fail cleanly with UNIMPLEMENTED.
TEST_F(GenerationServerTest, WorkerAndRendezvousStubsReachServer) {
  std::unique_ptr<Worker::Stub> worker = Worker::NewStub(channel_);
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  InitializeRequest init;
  init.set_model_path("/models/tiny");
  init.set_world_size(2);
  InitializeResponse resp;
  const grpc::Status status = worker->Initialize(&ctx, init, &resp);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << status.error_message();

  std::unique_ptr<Rendezvous::Stub> rdv = Rendezvous::NewStub(channel_);
  grpc::ClientContext rctx;
  SetDeadline(&rctx);
  RendezvousSetRequest set;
  set.set_key("nccl/unique_id");
  set.set_value(std::string("\x00\x01\x02", 3));
  RendezvousSetResponse set_resp;
  EXPECT_EQ(rdv->Set(&rctx, set, &set_resp).error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

}  // namespace
}  // namespace folio::v1
