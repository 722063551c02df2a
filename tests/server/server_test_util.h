#ifndef FOLIO_TESTS_SERVER_SERVER_TEST_UTIL_H_
#define FOLIO_TESTS_SERVER_SERVER_TEST_UTIL_H_

// Shared by the server tests: the demo model behind an engine with an
// in-process CPU worker, a sink that records a request's stream, and the
// greedy references of models/folio-demo/reference.json.

#include <condition_variable>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/kv_cache_dtype.h"
#include "common/model_config.h"
#include "common/tokenizer.h"
#include "common/worker_group.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "scheduler/server/engine.h"
#include "worker/cpu_worker.h"

namespace folio::testing_util {

inline const std::string kDemoDir = std::string(FOLIO_SOURCE_DIR) + "/models/folio-demo";

// One CPU worker in this process, optionally failing from a given step on,
// or holding a step until the test lets it go (the engine then stands still
// with everything before that step published).
class CpuWorkerGroup final : public WorkerGroup {
 public:
  explicit CpuWorkerGroup(std::unique_ptr<CpuWorker> worker) : worker_(std::move(worker)) {}
  absl::StatusOr<StepResult> Execute(const StepPlan& plan) override {
    if (fail_from_step_ >= 0 && static_cast<int64_t>(plan.step_id) >= fail_from_step_) {
      return absl::UnavailableError("injected worker failure");
    }
    {
      std::unique_lock<std::mutex> lock(hold_mu_);
      const int64_t step = static_cast<int64_t>(plan.step_id);
      if (hold_at_step_ >= 0 && step >= hold_at_step_) {
        held_step_ = step;
        hold_cv_.notify_all();
        hold_cv_.wait(lock, [&] { return hold_at_step_ < 0 || step < hold_at_step_; });
        held_step_ = -1;
      }
    }
    return worker_->Execute(plan);
  }
  void FailFromStep(int64_t step) { fail_from_step_ = step; }
  // Steps with step_id >= `step` wait in Execute until the hold moves past
  // them or Release(). Moving it lets the held step run.
  void HoldAtStep(int64_t step) {
    std::lock_guard<std::mutex> lock(hold_mu_);
    hold_at_step_ = step;
    hold_cv_.notify_all();
  }
  // Waits until step `step` is held; false at the deadline.
  bool WaitHeld(int64_t step, absl::Duration timeout = absl::Seconds(60)) {
    std::unique_lock<std::mutex> lock(hold_mu_);
    return hold_cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                             [&] { return held_step_ == step; });
  }
  void Release() { HoldAtStep(-1); }

 private:
  std::unique_ptr<CpuWorker> worker_;
  int64_t fail_from_step_ = -1;
  std::mutex hold_mu_;
  std::condition_variable hold_cv_;
  int64_t hold_at_step_ = -1;
  int64_t held_step_ = -1;
};

struct EngineSetup {
  int32_t num_device_blocks = 256;
  int32_t num_host_blocks = 0;
  bool host_prefix_cache = false;  // SchedulerConfig::host_prefix_cache
  int32_t block_size = 16;
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  PreemptionMode preemption_mode = PreemptionMode::kAuto;
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  CpuWorkerGroup** group_out = nullptr;  // to inject failures
  SchedulerMetrics* metrics = nullptr;    // Engine::Options::metrics
  std::function<void(const absl::Status&)> on_failure;  // Engine::Options::on_failure
  int32_t max_waiting_requests = 0;  // Engine::Options' overload bounds
  int64_t max_waiting_tokens = 0;
  int32_t stream_interval = 1;
  bool start = true;  // false: Submit only queues until the test calls Start()
};

inline std::unique_ptr<Engine> MakeDemoEngine(const EngineSetup& setup = {}) {
  CpuWorker::Options wo;
  wo.model_dir = kDemoDir;
  wo.block_size = setup.block_size;
  wo.num_device_blocks = setup.num_device_blocks;
  wo.num_host_blocks = setup.num_host_blocks;
  absl::StatusOr<std::unique_ptr<CpuWorker>> worker = CpuWorker::Create(wo);
  EXPECT_TRUE(worker.ok()) << worker.status();
  if (!worker.ok()) return nullptr;
  const ModelConfig config = (*worker)->config();
  const std::string kv_cache_dtype(kernels::CacheDtypeName((*worker)->kv_cache_dtype()));
  auto group = std::make_unique<CpuWorkerGroup>(std::move(*worker));
  if (setup.group_out != nullptr) *setup.group_out = group.get();

  Engine::Options eo;
  eo.scheduler.block_size = setup.block_size;
  eo.scheduler.num_device_blocks = setup.num_device_blocks;
  eo.scheduler.num_host_blocks = setup.num_host_blocks;
  eo.scheduler.host_prefix_cache = setup.host_prefix_cache;
  eo.scheduler.max_num_seqs = setup.max_num_seqs;
  eo.scheduler.max_num_batched_tokens = setup.max_num_batched_tokens;
  eo.scheduler.max_model_len = config.max_position_embeddings;
  eo.scheduler.sliding_window = config.CacheWindow();
  eo.scheduler.preemption_mode = setup.preemption_mode;
  eo.scheduler.policy = setup.policy;
  eo.scheduler.check_invariants = true;
  eo.model_name = "folio-demo";
  eo.kv_cache_dtype = kv_cache_dtype;  // as RemoteWorkerGroup reports it
  eo.on_failure = setup.on_failure;
  eo.metrics = setup.metrics;
  eo.max_waiting_requests = setup.max_waiting_requests;
  eo.max_waiting_tokens = setup.max_waiting_tokens;
  eo.stream_interval = setup.stream_interval;
  RequestLimits limits;
  limits.vocab_size = config.vocab_size;
  limits.max_model_len = config.max_position_embeddings;
  limits.eos_token_ids = config.eos_token_ids;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::LoadFromDirectory(kDemoDir);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(eo, std::move(*tokenizer), limits, std::move(group));
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return nullptr;
  if (setup.start) (*engine)->Start();
  return std::move(*engine);
}

// Records one request's stream; Wait() blocks (with a deadline) for its end.
class RecordingSink final : public GenerateSink {
 public:
  void OnResponse(v1::GenerateResponse response) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (response.has_finished()) done_ = true;
    responses_.push_back(std::move(response));
    cv_.notify_all();
  }
  void OnError(absl::Status status) override {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = status;
    done_ = true;
    cv_.notify_all();
  }
  bool Wait(absl::Duration timeout = absl::Seconds(120)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] { return done_; });
  }
  // Waits until at least one chunk arrived.
  bool WaitFirstChunk(absl::Duration timeout = absl::Seconds(120)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                        [&] { return done_ || !responses_.empty(); });
  }
  std::vector<v1::GenerateResponse> responses() const {
    std::lock_guard<std::mutex> lock(mu_);
    return responses_;
  }
  absl::Status error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<v1::GenerateResponse> responses_;
  absl::Status error_;
  bool done_ = false;
};

// A request submitted to an engine, with the sink recording its stream.
struct Submitted {
  std::shared_ptr<RecordingSink> sink = std::make_shared<RecordingSink>();
  std::string id;
};

inline Submitted Submit(Engine& engine, const v1::GenerateRequest& request) {
  Submitted s;
  absl::StatusOr<std::string> id = engine.Submit(request, s.sink);
  EXPECT_TRUE(id.ok()) << id.status();
  if (id.ok()) s.id = *id;
  return s;
}

// Waits until no request is live, then checks every KV block is back.
inline void ExpectDrained(Engine& engine, int32_t num_device_blocks, int32_t num_host_blocks = 0) {
  ASSERT_TRUE(engine.WaitIdle(absl::Seconds(60)));
  const EngineSnapshot snap = engine.Snapshot();
  EXPECT_EQ(snap.num_live_requests, 0);
  EXPECT_EQ(snap.num_running + snap.num_waiting + snap.num_swapped, 0);
  EXPECT_EQ(snap.num_free_device_blocks, num_device_blocks) << "device KV blocks leaked";
  EXPECT_EQ(snap.num_free_host_blocks, num_host_blocks) << "host KV blocks leaked";
}

// One output sequence, reassembled from a stream.
struct StreamedSequence {
  std::string text;
  std::vector<TokenId> token_ids;
  std::vector<float> logprobs;
  v1::SequenceFinish finish;
};

// Concatenates the deltas of every chunk; the Finished message goes last.
inline std::vector<StreamedSequence> Reassemble(const std::vector<v1::GenerateResponse>& stream,
                                                v1::Usage* usage = nullptr) {
  std::vector<StreamedSequence> out;
  for (const v1::GenerateResponse& r : stream) {
    if (r.has_chunk()) {
      for (const v1::SequenceDelta& d : r.chunk().deltas()) {
        if (out.size() <= d.index()) out.resize(d.index() + 1);
        StreamedSequence& s = out[d.index()];
        s.text += d.text();
        s.token_ids.insert(s.token_ids.end(), d.token_ids().begin(), d.token_ids().end());
        for (const v1::TokenLogprob& lp : d.logprobs()) s.logprobs.push_back(lp.logprob());
      }
    } else if (r.has_finished()) {
      for (const v1::SequenceFinish& f : r.finished().sequences()) {
        if (out.size() <= f.index()) out.resize(f.index() + 1);
        out[f.index()].finish = f;
      }
      if (usage != nullptr) *usage = r.finished().usage();
    }
  }
  return out;
}

struct ReferenceCase {
  std::string prompt;
  std::vector<TokenId> prompt_ids, output_ids;
  std::vector<double> logprobs;
};

inline std::vector<ReferenceCase> LoadReference() {
  std::ifstream in(kDemoDir + "/reference.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<ReferenceCase> cases;
  for (const auto& c : j.at("cases")) {
    ReferenceCase rc;
    rc.prompt = c.at("prompt").get<std::string>();
    rc.prompt_ids = c.at("prompt_token_ids").get<std::vector<TokenId>>();
    rc.output_ids = c.at("output_token_ids").get<std::vector<TokenId>>();
    rc.logprobs = c.at("logprobs").get<std::vector<double>>();
    cases.push_back(std::move(rc));
  }
  return cases;
}

// A greedy request for `num_tokens` prompt token ids (any ids the demo model has).
inline v1::GenerateRequest GreedyTokenRequest(int num_tokens, int max_tokens) {
  v1::GenerateRequest r;
  for (int i = 0; i < num_tokens; ++i) r.mutable_token_ids()->add_ids(100 + i);
  r.mutable_sampling_params()->set_temperature(0);
  r.mutable_sampling_params()->set_max_tokens(max_tokens);
  r.mutable_sampling_params()->set_ignore_eos(true);
  return r;
}

inline v1::GenerateRequest GreedyRequest(const std::string& prompt, int max_tokens) {
  v1::GenerateRequest r;
  r.set_text(prompt);
  r.mutable_sampling_params()->set_temperature(0);
  r.mutable_sampling_params()->set_max_tokens(max_tokens);
  r.mutable_sampling_params()->set_ignore_eos(true);
  return r;
}

}  // namespace folio::testing_util

#endif  // FOLIO_TESTS_SERVER_SERVER_TEST_UTIL_H_
