// folio.v1.Worker's Initialize called again on a live rank, as the scheduler
// rebuilding the group after a rank failed calls it: it cancels every Step
// stream and initializes every rank again, with a new rendezvous prefix, and
// the new group replaces the old. The ranks here are WorkerServices in this
// process (one rank, or two over shared memory or Gloo): the same answer,
// the same tokens, a step blocked on a hung peer aborted, an open stream
// waited for.

#include "worker/worker_service.h"

#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/plan_proto.h"
#include "google/protobuf/util/message_differencer.h"
#include "tests/worker/worker_service_test_util.h"
#include "tests/worker/worker_test_util.h"
#include "worker/rendezvous_store.h"

namespace folio {
namespace {

// A WorkerService behind a gRPC server of its own.
struct InProcessWorker {
  explicit InProcessWorker(const WorkerService::Options& options) : service(options) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    if (server != nullptr) stub = v1::Worker::NewStub(Channel(port));
  }
  ~InProcessWorker() {
    if (server != nullptr) server->Shutdown(In(5));
  }
  WorkerService service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::Worker::Stub> stub;
};

using Workers = std::vector<std::unique_ptr<InProcessWorker>>;

Workers StartWorkers(int world, absl::Duration collective_timeout,
                     WorkerService::Options::Collectives collectives =
                         WorkerService::Options::Collectives::kAuto) {
  WorkerService::Options options;
  options.collective_timeout = collective_timeout;
  options.collectives = collectives;
  Workers workers;
  for (int r = 0; r < world; ++r) {
    workers.push_back(std::make_unique<InProcessWorker>(options));
    EXPECT_NE(workers.back()->stub, nullptr);
  }
  return workers;
}

grpc::Status InitializeRank(Workers& workers, int rank, const std::string& rendezvous,
                            const std::string& prefix, v1::InitializeResponse* resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(120));
  v1::InitializeRequest req;
  req.set_model_path(kDemo);
  req.set_rank(rank);
  req.set_world_size(static_cast<uint32_t>(workers.size()));
  req.set_kv_cache_bytes(kKvBytes);
  req.set_swap_space_bytes(kSwapBytes);
  req.set_rendezvous_address(rendezvous);
  req.set_rendezvous_prefix(prefix);
  return workers[rank]->stub->Initialize(&ctx, req, resp);
}

// Initialize on every rank at once (it returns once all have joined).
std::vector<grpc::Status> InitializeAll(Workers& workers, const std::string& rendezvous,
                                        const std::string& prefix,
                                        std::vector<v1::InitializeResponse>* responses) {
  std::vector<grpc::Status> status(workers.size());
  responses->assign(workers.size(), {});
  std::vector<std::thread> threads;
  for (size_t r = 0; r < workers.size(); ++r) {
    threads.emplace_back([&, r] {
      status[r] = InitializeRank(workers, int(r), rendezvous, prefix, &(*responses)[r]);
    });
  }
  for (auto& t : threads) t.join();
  return status;
}

struct Blocks {
  uint32_t device = UINT32_MAX;
  uint32_t host = UINT32_MAX;
};

// The scheduler's choice: the smallest counts any rank reported, on every rank.
absl::StatusOr<Blocks> AllocateAll(Workers& workers,
                                   const std::vector<v1::InitializeResponse>& init) {
  Blocks blocks;
  for (const v1::InitializeResponse& r : init) {
    blocks.device = std::min(blocks.device, r.num_device_blocks());
    blocks.host = std::min(blocks.host, r.num_host_blocks());
  }
  for (auto& w : workers) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(60));
    v1::AllocateCacheRequest req;
    req.set_num_device_blocks(blocks.device);
    req.set_num_host_blocks(blocks.host);
    v1::AllocateCacheResponse resp;
    grpc::Status s = w->stub->AllocateCache(&ctx, req, &resp);
    if (!s.ok()) return absl::Status(absl::StatusCode(s.error_code()), s.error_message());
  }
  return blocks;
}

// One Step stream per rank.
class StepStreams {
 public:
  explicit StepStreams(Workers& workers) {
    for (auto& w : workers) {
      ctx_.push_back(std::make_unique<grpc::ClientContext>());
      ctx_.back()->set_deadline(In(300));
      streams_.push_back(w->stub->Step(ctx_.back().get()));
    }
  }
  ~StepStreams() { Cancel(); }

  // Greedy tokens of `prompts` through a real Scheduler, every plan sent to
  // every rank, rank 0's samples.
  absl::StatusOr<std::vector<std::vector<TokenId>>> Greedy(
      const std::vector<testing::Prompt>& prompts, Blocks blocks) {
    SchedulerConfig sc;
    sc.num_device_blocks = static_cast<int32_t>(blocks.device);
    sc.num_host_blocks = static_cast<int32_t>(blocks.host);
    sc.max_num_batched_tokens = 64;
    sc.max_model_len = 512;
    absl::StatusOr<std::unique_ptr<Scheduler>> scheduler = Scheduler::Create(sc);
    if (!scheduler.ok()) return scheduler.status();
    return testing::RunGreedy(**scheduler, prompts,
                              [&](const StepPlan& plan) -> absl::StatusOr<StepResult> {
      v1::StepPlan proto;
      ToProto(plan, &proto);
      for (auto& stream : streams_) {
        if (!stream->Write(proto)) return absl::UnavailableError("Step stream: Write failed");
      }
      StepResult out;
      for (size_t r = 0; r < streams_.size(); ++r) {
        v1::StepResult result;
        if (!streams_[r]->Read(&result)) {
          return absl::UnavailableError(absl::StrCat("rank ", r, "'s Step stream ended"));
        }
        if (absl::Status s = FromProto(result.status()); !s.ok()) return s;
        if (r == 0) {
          if (absl::Status s = FromProto(result, &out); !s.ok()) return s;
        }
      }
      return out;
    });
  }

  bool Send(int rank, const v1::StepPlan& plan) { return streams_[rank]->Write(plan); }
  // Rank `rank` answers one plan with this status code.
  int StepCode(int rank, const v1::StepPlan& plan) {
    v1::StepResult result;
    if (!Send(rank, plan) || !streams_[rank]->Read(&result)) return -1;
    return result.status().code();
  }

  // What the scheduler does when a rank failed.
  void Cancel() {
    if (closed_) return;
    for (auto& ctx : ctx_) ctx->TryCancel();
    for (auto& stream : streams_) stream->Finish();  // CANCELLED
    closed_ = true;
  }
  // Ends the streams as a scheduler that stops stepping does.
  bool Close() {
    bool ok = true;
    for (auto& stream : streams_) {
      stream->WritesDone();
      ok = stream->Finish().ok() && ok;
    }
    closed_ = true;
    return ok;
  }

 private:
  std::vector<std::unique_ptr<grpc::ClientContext>> ctx_;
  std::vector<std::unique_ptr<grpc::ClientReaderWriter<v1::StepPlan, v1::StepResult>>> streams_;
  bool closed_ = false;
};

void ExpectAllOk(const std::vector<grpc::Status>& status) {
  for (size_t r = 0; r < status.size(); ++r) {
    EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r].error_message();
  }
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Waits until `rank`'s Initialize under `prefix` has published its first key
// in the rendezvous store (it then waits for its peers'): its host identity
// (kAuto), or its Gloo address (kGloo; Gloo's own key "rank_<r>").
absl::Status WaitForRankToJoin(const std::string& rendezvous, const std::string& prefix, int rank,
                               WorkerService::Options::Collectives collectives) {
  const bool gloo = collectives == WorkerService::Options::Collectives::kGloo;
  RendezvousStore::Options so;
  so.address = rendezvous;
  so.prefix = prefix + (gloo ? "/gloo/" : "/host/");
  absl::StatusOr<std::unique_ptr<RendezvousStore>> store = RendezvousStore::Create(so);
  if (!store.ok()) return store.status();
  return (*store)->Wait({(gloo ? "rank_" : "") + std::to_string(rank)}, absl::Seconds(30));
}

using WorkerServiceAgainTest = WorkerProcessesTest;  // for its rendezvous service

TEST_F(WorkerServiceAgainTest, ReadyWorkerInitializedAgainAnswersTheSameAndSteps) {
  Workers workers = StartWorkers(1, absl::Seconds(30));
  const auto prompts = testing::MixedPrompts(2040, 6, 5);
  std::vector<v1::InitializeResponse> first, second;
  ExpectAllOk(InitializeAll(workers, rendezvous_address_, "again-1/a", &first));
  absl::StatusOr<Blocks> blocks = AllocateAll(workers, first);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  StepStreams streams(workers);
  auto before = streams.Greedy(prompts, *blocks);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(*before, Reference(prompts, int32_t(blocks->device), int32_t(blocks->host)));

  streams.Cancel();
  ExpectAllOk(InitializeAll(workers, rendezvous_address_, "again-1/b", &second));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(first[0], second[0]))
      << first[0].DebugString() << " vs " << second[0].DebugString();
  absl::StatusOr<Blocks> again = AllocateAll(workers, second);
  ASSERT_TRUE(again.ok()) << again.status();
  StepStreams new_streams(workers);
  auto after = new_streams.Greedy(prompts, *again);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(*after, *before);
  EXPECT_TRUE(new_streams.Close());
}

// A Step stream nobody cancels keeps a second Initialize waiting: it gives
// up after collective_timeout and leaves the worker serving as before.
TEST_F(WorkerServiceAgainTest, InitializeAgainGivesUpWhileTheStepStreamStaysOpen) {
  Workers workers = StartWorkers(1, absl::Seconds(1));
  std::vector<v1::InitializeResponse> init;
  ExpectAllOk(InitializeAll(workers, rendezvous_address_, "again-2/a", &init));
  ASSERT_TRUE(AllocateAll(workers, init).ok());
  StepStreams streams(workers);
  v1::StepPlan empty;
  empty.set_step_id(1);
  ASSERT_EQ(streams.StepCode(0, empty), 0);

  const auto start = std::chrono::steady_clock::now();
  v1::InitializeResponse resp;
  grpc::Status s = InitializeRank(workers, 0, rendezvous_address_, "again-2/b", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_NE(s.error_message().find("the previous step is still running"), std::string::npos)
      << s.error_message();
  EXPECT_GE(SecondsSince(start), 0.9);
  // Still ready: the stream serves, the cache stays.
  empty.set_step_id(2);
  EXPECT_EQ(streams.StepCode(0, empty), 0);
  EXPECT_FALSE(AllocateAll(workers, init).ok());
  EXPECT_TRUE(streams.Close());
  ExpectAllOk(InitializeAll(workers, rendezvous_address_, "again-2/c", &init));
}

// Two ranks: a second Initialize while the first runs is refused; rank 0
// stuck in a step whose peer never comes (only rank 0 got the plan) is
// freed by the new Initialize, which aborts the group long before the
// collective timeout; under a new prefix both ranks step together again.
// For both kinds of collectives: shared memory (chosen by kAuto, as on one
// host) and Gloo (TCP) abort alike.
void ExpectInitializeAgainAbortsAStepWaitingForAHungPeer(
    const std::string& rendezvous_address, WorkerService::Options::Collectives collectives,
    const std::string& prefix) {
  constexpr absl::Duration kCollectiveTimeout = absl::Seconds(30);
  Workers workers = StartWorkers(2, kCollectiveTimeout, collectives);
  std::vector<v1::InitializeResponse> init(2);
  grpc::Status rank0;
  std::thread first([&] {
    rank0 = InitializeRank(workers, 0, rendezvous_address, prefix + "/a", &init[0]);
  });
  // No ASSERT: join first.
  EXPECT_TRUE(WaitForRankToJoin(rendezvous_address, prefix + "/a", 0, collectives).ok());
  v1::InitializeResponse refused;
  grpc::Status s = InitializeRank(workers, 0, rendezvous_address, prefix + "/a", &refused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("running already"), std::string::npos) << s.error_message();
  grpc::Status rank1 = InitializeRank(workers, 1, rendezvous_address, prefix + "/a", &init[1]);
  first.join();
  ExpectAllOk({rank0, rank1});
  absl::StatusOr<Blocks> blocks = AllocateAll(workers, init);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  const auto prompts = testing::MixedPrompts(2040, 6, 7);
  StepStreams streams(workers);
  auto before = streams.Greedy(prompts, *blocks);
  ASSERT_TRUE(before.ok()) << before.status();

  // A prefill for rank 0 only: its all-reduce waits for rank 1, which never
  // comes (a hung peer). Give it a moment to get there.
  SchedulerConfig sc;
  sc.num_device_blocks = static_cast<int32_t>(blocks->device);
  sc.max_model_len = 512;
  auto scheduler = Scheduler::Create(sc);
  ASSERT_TRUE(scheduler.ok());
  RequestSpec spec;
  spec.id = 99;
  spec.prompt = prompts[0].tokens;
  ASSERT_TRUE((*scheduler)->AddRequest(spec).ok());
  v1::StepPlan lone;
  ToProto((*scheduler)->Schedule(), &lone);
  ASSERT_GT(lone.num_scheduled_tokens(), 0u);
  ASSERT_TRUE(streams.Send(0, lone));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  // Rank 0 first, so that only its Abort can free it (rank 1 leaving the
  // old group would break it too): it gets to the new group's rendezvous
  // long before the blocked step's timeout.
  streams.Cancel();
  const auto start = std::chrono::steady_clock::now();
  std::vector<v1::InitializeResponse> again(2);
  first = std::thread([&] {
    rank0 = InitializeRank(workers, 0, rendezvous_address, prefix + "/b", &again[0]);
  });
  // No ASSERT: join first.
  EXPECT_TRUE(WaitForRankToJoin(rendezvous_address, prefix + "/b", 0, collectives).ok());
  EXPECT_LT(SecondsSince(start), absl::ToDoubleSeconds(kCollectiveTimeout) / 3)
      << "the new Initialize waited for the blocked step's timeout";
  rank1 = InitializeRank(workers, 1, rendezvous_address, prefix + "/b", &again[1]);
  first.join();
  ExpectAllOk({rank0, rank1});
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(init[r], again[r]))
        << "rank " << r;
  }
  absl::StatusOr<Blocks> new_blocks = AllocateAll(workers, again);
  ASSERT_TRUE(new_blocks.ok()) << new_blocks.status();
  StepStreams new_streams(workers);
  auto after = new_streams.Greedy(prompts, *new_blocks);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(*after, *before);
  EXPECT_TRUE(new_streams.Close());
}

TEST_F(WorkerServiceAgainTest, InitializeAgainAbortsAStepWaitingForAHungPeerOverSharedMemory) {
  ExpectInitializeAgainAbortsAStepWaitingForAHungPeer(
      rendezvous_address_, WorkerService::Options::Collectives::kAuto, "again-3");
}

TEST_F(WorkerServiceAgainTest, InitializeAgainAbortsAStepWaitingForAHungPeerOverGloo) {
  ExpectInitializeAgainAbortsAStepWaitingForAHungPeer(
      rendezvous_address_, WorkerService::Options::Collectives::kGloo, "again-4");
}

}  // namespace
}  // namespace folio
