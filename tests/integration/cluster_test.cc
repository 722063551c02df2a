// Multi-process tests of a real cluster on 127.0.0.1: folio-scheduler and
// 1, 2 or 4 folio-worker processes (Gloo all-reduce between them) serving
// the demo model, driven through the C++ gRPC client:
//  - greedy streams reproduce reference.json (what `folio run` reproduces)
//    at every tensor-parallel size;
//  - 64 concurrent streams with mixed lengths, n > 1 and beam search;
//  - abort and client cancellation mid-stream (worker failures:
//    worker_failure_test.cc);
//  - a KV pool too small for the load (swap and recompute) gives the same
//    outputs as an ample one, greedy and seeded.
// Every test ends with Stop(): the scheduler exits 0 only when every KV
// block is back in its pool.

#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cluster_harness.h"
#include "generation_client.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace folio {
namespace {

using testing_util::Accumulate;
using testing_util::Cluster;
using testing_util::Generate;
using testing_util::Greedy;
using testing_util::Output;
using testing_util::RunConcurrently;
using testing_util::Seeded;

constexpr int kMaxTokens = 24;

struct ReferenceCase {
  std::string prompt;
  std::vector<int32_t> output_ids;
  std::vector<double> logprobs;
};

std::vector<ReferenceCase> LoadReference() {
  std::ifstream in(std::string(FOLIO_SOURCE_DIR) + "/models/folio-demo/reference.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<ReferenceCase> cases;
  for (const auto& c : j.at("cases")) {
    cases.push_back({c.at("prompt").get<std::string>(),
                     c.at("output_token_ids").get<std::vector<int32_t>>(),
                     c.at("logprobs").get<std::vector<double>>()});
  }
  return cases;
}

class TensorParallelTest : public ::testing::TestWithParam<int> {};

TEST_P(TensorParallelTest, GreedyStreamsReproduceTheReference) {
  Cluster cluster;
  Cluster::Options options;
  options.tensor_parallel_size = GetParam();
  ASSERT_EQ(cluster.Start(options), "");
  EXPECT_EQ(cluster.info().tensor_parallel_size(), static_cast<uint32_t>(GetParam()));
  const std::vector<ReferenceCase> cases = LoadReference();
  std::vector<v1::GenerateRequest> requests;
  for (const ReferenceCase& c : cases) {
    requests.push_back(Greedy(c.prompt, kMaxTokens));
    requests.back().mutable_sampling_params()->set_logprobs(0);
  }
  const std::vector<Output> outputs = RunConcurrently(cluster.stub(), requests);
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_TRUE(outputs[i].status.ok()) << outputs[i].status.error_message();
    ASSERT_EQ(outputs[i].tokens.size(), 1u);
    EXPECT_EQ(outputs[i].tokens[0],
              std::vector<int32_t>(cases[i].output_ids.begin(), cases[i].output_ids.begin() + kMaxTokens))
        << "case " << i << " at tp=" << GetParam();
    ASSERT_EQ(outputs[i].logprobs[0].size(), static_cast<size_t>(kMaxTokens));
    for (int t = 0; t < kMaxTokens; ++t) EXPECT_NEAR(outputs[i].logprobs[0][t], cases[i].logprobs[t], 1e-3);
    EXPECT_EQ(outputs[i].reasons[0], v1::FINISH_REASON_LENGTH);
  }
  EXPECT_EQ(cluster.Stop(), 0) << "folio-scheduler failed or leaked KV blocks";
}

INSTANTIATE_TEST_SUITE_P(Sizes, TensorParallelTest, ::testing::Values(1, 2, 4),
                         [](const auto& info) { return "tp" + std::to_string(info.param); });

TEST(ClusterTest, SixtyFourConcurrentStreamsWithParallelSamplingAndBeams) {
  Cluster cluster;
  Cluster::Options options;
  options.tensor_parallel_size = 2;
  ASSERT_EQ(cluster.Start(options), "");
  const std::vector<ReferenceCase> cases = LoadReference();
  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < 64; ++i) {
    const ReferenceCase& c = cases[i % cases.size()];
    const int max_tokens = 1 + (i * 7) % 24;
    if (i % 4 == 0) {
      requests.push_back(Greedy(c.prompt, max_tokens));
    } else if (i % 4 == 1) {
      requests.push_back(Seeded(c.prompt, max_tokens, i));
      requests.back().mutable_sampling_params()->set_n(3);
    } else if (i % 4 == 2) {
      requests.push_back(Greedy(c.prompt, max_tokens));
      requests.back().mutable_sampling_params()->set_beam_width(2);
      requests.back().mutable_sampling_params()->set_n(2);
    } else {
      requests.push_back(Seeded(c.prompt, max_tokens, i));
      requests.back().mutable_sampling_params()->set_best_of(3);
      requests.back().mutable_sampling_params()->set_n(2);
    }
  }
  const std::vector<Output> outputs = RunConcurrently(cluster.stub(), requests);
  for (int i = 0; i < 64; ++i) {
    const Output& o = outputs[i];
    ASSERT_TRUE(o.status.ok()) << "request " << i << ": " << o.status.error_message();
    ASSERT_TRUE(o.finished) << "request " << i;
    const size_t n = i % 4 == 0 ? 1 : i % 4 == 1 ? 3 : 2;
    ASSERT_EQ(o.tokens.size(), n) << "request " << i;
    const int max_tokens = 1 + (i * 7) % 24;
    for (size_t s = 0; s < n; ++s) {
      EXPECT_GE(o.tokens[s].size(), 1u);
      EXPECT_LE(o.tokens[s].size(), static_cast<size_t>(max_tokens));
      EXPECT_TRUE(o.reasons[s] == v1::FINISH_REASON_LENGTH || o.reasons[s] == v1::FINISH_REASON_EOS)
          << "request " << i << " sequence " << s << " reason " << o.reasons[s];
    }
    if (i % 4 == 0) {
      const ReferenceCase& c = cases[i % cases.size()];
      EXPECT_EQ(o.tokens[0], std::vector<int32_t>(c.output_ids.begin(), c.output_ids.begin() + max_tokens))
          << "request " << i;
    }
  }
  EXPECT_EQ(cluster.Stop(), 0) << "folio-scheduler failed or leaked KV blocks";
}

TEST(ClusterTest, AbortAndCancellationMidStream) {
  Cluster cluster;
  Cluster::Options options;
  options.tensor_parallel_size = 2;
  ASSERT_EQ(cluster.Start(options), "");
  constexpr int kStreams = 4;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>>> readers;
  std::vector<Output> outputs(kStreams);
  for (int i = 0; i < kStreams; ++i) {
    v1::GenerateRequest r = Greedy("In the beginning", 5000);
    r.set_request_id("long-" + std::to_string(i));
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    readers.push_back(cluster.stub().Generate(contexts.back().get(), r));
    v1::GenerateResponse first;
    ASSERT_TRUE(readers.back()->Read(&first));  // running
    Accumulate(first, outputs[i]);
  }
  // Streams 0 and 1: cancelled by the client; 2 and 3: aborted by id.
  contexts[0]->TryCancel();
  contexts[1]->TryCancel();
  for (int i = 2; i < kStreams; ++i) {
    grpc::ClientContext ctx;
    v1::AbortRequest abort;
    abort.set_request_id("long-" + std::to_string(i));
    v1::AbortResponse response;
    ASSERT_TRUE(cluster.stub().Abort(&ctx, abort, &response).ok());
    EXPECT_TRUE(response.found());
  }
  for (int i = 0; i < kStreams; ++i) {
    v1::GenerateResponse r;
    while (readers[i]->Read(&r)) Accumulate(r, outputs[i]);
    const grpc::Status status = readers[i]->Finish();
    if (i < 2) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);
    } else {
      EXPECT_TRUE(status.ok()) << status.error_message();
      ASSERT_TRUE(outputs[i].finished);
      EXPECT_EQ(outputs[i].reasons[0], v1::FINISH_REASON_ABORT);
      EXPECT_LT(outputs[i].tokens[0].size(), 5000u);
    }
  }
  // The cluster still serves.
  const Output after = Generate(cluster.stub(), Greedy("And God said", 4));
  ASSERT_TRUE(after.status.ok());
  EXPECT_EQ(after.tokens[0].size(), 4u);
  EXPECT_EQ(cluster.Stop(), 0) << "folio-scheduler failed or leaked KV blocks";
}

// The same greedy and seeded outputs from an ample pool and from a pool far
// too small for the load, under swap and under recompute preemption.
TEST(ClusterTest, PreemptionGivesTheSameOutputsAsAnAmplePool) {
  const std::vector<ReferenceCase> cases = LoadReference();
  std::vector<v1::GenerateRequest> requests;
  for (size_t i = 0; i < cases.size(); ++i) {
    requests.push_back(i % 2 == 0 ? Greedy(cases[i].prompt, kMaxTokens)
                                  : Seeded(cases[i].prompt, kMaxTokens, 100 + i));
  }
  auto run = [&](const std::vector<std::string>& flags) {
    Cluster cluster;
    Cluster::Options options;
    options.tensor_parallel_size = 2;
    options.scheduler_flags = flags;
    EXPECT_EQ(cluster.Start(options), "");
    std::vector<Output> outputs = RunConcurrently(cluster.stub(), requests);
    EXPECT_EQ(cluster.Stop(), 0) << "folio-scheduler failed or leaked KV blocks";
    return outputs;
  };
  const std::vector<Output> ample = run({});
  const std::vector<Output> swap =
      run({"--num-device-blocks", "12", "--num-host-blocks", "64", "--preemption-mode", "swap"});
  const std::vector<Output> recompute =
      run({"--num-device-blocks", "12", "--num-host-blocks", "0", "--preemption-mode", "recompute"});
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(ample[i].status.ok() && swap[i].status.ok() && recompute[i].status.ok()) << i;
    ASSERT_EQ(ample[i].tokens.size(), 1u);
    EXPECT_EQ(swap[i].tokens, ample[i].tokens) << "request " << i << " (swap)";
    EXPECT_EQ(recompute[i].tokens, ample[i].tokens) << "request " << i << " (recompute)";
  }
}

// The benchmark baselines (Orca-style reservations, FasterTransformer-style
// static batching) change when requests run, never what they produce; a
// pool too small for a max_model_len reservation each keeps them queued.
TEST(ClusterTest, ReservationsAndStaticBatchingGiveTheSameOutputs) {
  const std::vector<ReferenceCase> cases = LoadReference();
  std::vector<v1::GenerateRequest> requests;
  for (size_t i = 0; i < cases.size(); ++i) {
    requests.push_back(i % 2 == 0 ? Greedy(cases[i].prompt, kMaxTokens)
                                  : Seeded(cases[i].prompt, kMaxTokens, 200 + i));
  }
  auto run = [&](const std::vector<std::string>& flags) {
    Cluster cluster;
    Cluster::Options options;
    options.scheduler_flags = flags;
    EXPECT_EQ(cluster.Start(options), "");
    std::vector<Output> outputs = RunConcurrently(cluster.stub(), requests);
    EXPECT_EQ(cluster.Stop(), 0) << "folio-scheduler failed or leaked KV blocks";
    return outputs;
  };
  const std::vector<Output> paged = run({});
  // 64 blocks of 16 and max_model_len 512: two max reservations at a time.
  const std::vector<std::vector<std::string>> baselines = {
      {"--reservation-policy", "max", "--num-device-blocks", "64"},
      {"--reservation-policy", "pow2", "--batching", "static"},
      {"--reservation-policy", "max", "--batching", "static", "--num-device-blocks", "64"}};
  for (const std::vector<std::string>& flags : baselines) {
    const std::vector<Output> outputs = run(flags);
    for (size_t i = 0; i < requests.size(); ++i) {
      ASSERT_TRUE(paged[i].status.ok() && outputs[i].status.ok()) << i;
      EXPECT_EQ(outputs[i].tokens, paged[i].tokens) << "request " << i << " with " << flags[1]
                                                    << " " << flags[3];
    }
  }
}

}  // namespace
}  // namespace folio
