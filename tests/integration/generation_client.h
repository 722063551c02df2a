#ifndef FOLIO_TESTS_INTEGRATION_GENERATION_CLIENT_H_
#define FOLIO_TESTS_INTEGRATION_GENERATION_CLIENT_H_

// The integration tests' side of folio.v1.Generation: requests, and streams
// accumulated into whole outputs per sequence.

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "folio/v1/generation.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace folio::testing_util {

struct Output {
  grpc::Status status;
  std::string request_id;
  std::vector<std::vector<int32_t>> tokens;  // per sequence
  std::vector<std::vector<float>> logprobs;
  std::vector<std::string> texts;
  std::vector<v1::FinishReason> reasons;
  bool finished = false;
  int chunks = 0;
};

inline void Accumulate(const v1::GenerateResponse& r, Output& out) {
  out.request_id = r.request_id();
  auto grow = [&](size_t i) {
    if (out.tokens.size() <= i) {
      out.tokens.resize(i + 1);
      out.logprobs.resize(i + 1);
      out.texts.resize(i + 1);
      out.reasons.resize(i + 1);
    }
  };
  if (r.has_chunk()) {
    ++out.chunks;
    for (const v1::SequenceDelta& d : r.chunk().deltas()) {
      grow(d.index());
      out.tokens[d.index()].insert(out.tokens[d.index()].end(), d.token_ids().begin(), d.token_ids().end());
      for (const auto& lp : d.logprobs()) out.logprobs[d.index()].push_back(lp.logprob());
      out.texts[d.index()] += d.text();
    }
  } else if (r.has_finished()) {
    out.finished = true;
    for (const v1::SequenceFinish& f : r.finished().sequences()) {
      grow(f.index());
      out.reasons[f.index()] = f.reason();
    }
  }
}

inline Output Generate(v1::Generation::Stub& stub, const v1::GenerateRequest& request) {
  Output out;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
  auto reader = stub.Generate(&ctx, request);
  v1::GenerateResponse r;
  while (reader->Read(&r)) Accumulate(r, out);
  out.status = reader->Finish();
  return out;
}

inline v1::GenerateRequest Greedy(const std::string& prompt, int max_tokens) {
  v1::GenerateRequest r;
  r.set_text(prompt);
  r.mutable_sampling_params()->set_temperature(0);
  r.mutable_sampling_params()->set_max_tokens(max_tokens);
  r.mutable_sampling_params()->set_ignore_eos(true);
  return r;
}

inline v1::GenerateRequest Seeded(const std::string& prompt, int max_tokens, uint64_t seed) {
  v1::GenerateRequest r = Greedy(prompt, max_tokens);
  r.mutable_sampling_params()->set_temperature(0.9f);
  r.mutable_sampling_params()->set_top_p(0.95f);
  r.mutable_sampling_params()->set_seed(seed);
  return r;
}

// Runs every request on its own client thread, all at once.
inline std::vector<Output> RunConcurrently(v1::Generation::Stub& stub,
                                    const std::vector<v1::GenerateRequest>& requests) {
  std::vector<Output> outputs(requests.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < requests.size(); ++i) {
    threads.emplace_back([&, i] { outputs[i] = Generate(stub, requests[i]); });
  }
  for (std::thread& t : threads) t.join();
  return outputs;
}

}  // namespace folio::testing_util

#endif  // FOLIO_TESTS_INTEGRATION_GENERATION_CLIENT_H_
