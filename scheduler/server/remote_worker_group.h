#ifndef FOLIO_SCHEDULER_SERVER_REMOTE_WORKER_GROUP_H_
#define FOLIO_SCHEDULER_SERVER_REMOTE_WORKER_GROUP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/worker_group.h"
#include "folio/v1/worker.grpc.pb.h"

namespace folio {

// The folio-worker processes of one model replica, driven over gRPC: every
// rank is initialised with the same settings, the cache is sized to the
// smallest rank's capacity, and each plan goes to every rank over one
// long-lived Step stream per rank. Rank 0's samples are the step's result.
//
// The Step streams use gRPC's asynchronous API on one completion queue that
// the calling thread drives itself: a step starts the write of the plan and
// the read of the result on every rank at once, then waits for the 2N
// completions. No extra thread sits between the engine and the sockets (the
// step deadline is the wait's deadline), so a round trip costs one network
// hop each way, not N sequential writes and thread hand-offs.
//
// Every call has a deadline. A step's adapts to the work (StepTimeout). A
// step that overruns, or a rank whose stream breaks, cancels the streams:
// the step fails and so does every later one until Rebuild() has
// reconnected to every rank (restarted processes, or survivors initialized
// again) and formed a new collective group. A rank that reports a failed
// plan (a status in its StepResult) fails only that step.
// Thread-compatible: one thread calls Execute().
class RemoteWorkerGroup final : public WorkerGroup {
 public:
  struct Options {
    std::vector<std::string> addresses;  // rank r listens at addresses[r]
    // Sent to every rank with rank and world_size filled in.
    v1::InitializeRequest initialize;
    absl::Duration connect_timeout = absl::Seconds(120);  // workers may still be starting
    absl::Duration initialize_timeout = absl::Minutes(10);  // loading a large model
    // A step's deadline: step_timeout_multiple x the slowest recent step
    // (at least step_timeout_min), plus as much again per prefill token at
    // the slowest recent seconds per token, so a long prompt is not taken
    // for a hang; never above step_timeout (also the deadline until a few
    // steps have been measured).
    absl::Duration step_timeout = absl::Minutes(10);
    absl::Duration step_timeout_min = absl::Seconds(10);
    double step_timeout_multiple = 10.0;
    // Rebuild(): how long one attempt waits for a rank to accept a connection.
    absl::Duration reconnect_timeout = absl::Seconds(2);
    // Gives up the rendezvous of a group generation (RendezvousService::
    // Abandon) when a rank fails while the group forms, so the others stop
    // waiting for it, and when a rebuild replaces the group. Null: none
    // (tensor parallelism 1, or tests).
    std::function<void(const std::string& prefix)> abandon_rendezvous;
    int max_message_bytes = 64 << 20;  // as the workers (kMaxWorkerMessageBytes)
    // Caps on the pools (0 = whatever fits on every rank), like vLLM's
    // num_gpu_blocks_override: small pools for tests and experiments.
    int32_t max_device_blocks = 0;
    int32_t max_host_blocks = -1;  // -1 = whatever fits
  };

  // Connects, initialises and allocates the cache on every rank.
  static absl::StatusOr<std::unique_ptr<RemoteWorkerGroup>> Connect(const Options& options);
  RemoteWorkerGroup(const RemoteWorkerGroup&) = delete;
  RemoteWorkerGroup& operator=(const RemoteWorkerGroup&) = delete;
  ~RemoteWorkerGroup() override;

  absl::StatusOr<StepResult> Execute(const StepPlan& plan) override;
  // Begin writes the plan to every rank and starts the reads; Wait drains
  // them (the step deadline counts from Begin).
  absl::Status Begin(const StepPlan& plan) override;
  absl::StatusOr<StepResult> Wait() override;
  // Closes the broken streams, reconnects to every rank, initializes them
  // all again under a fresh rendezvous prefix, allocates caches of the
  // sizes chosen at Connect, opens new streams and runs a warm-up forward
  // pass of one token. FAILED_PRECONDITION for
  // a rank that comes back with another model or fewer blocks; UNAVAILABLE
  // while a rank is unreachable. One attempt; the caller retries.
  bool CanRebuild() const override { return true; }
  absl::Status Rebuild() override;
  // grpc.health.v1 Check on every rank (deadline step_timeout_min / 2).
  absl::Status CheckHealth() override;
  // The deadline Begin(plan) would give a step of `plan`.
  absl::Duration StepTimeout(const StepPlan& plan) const;

  // Closes the step streams and asks every rank to exit. Idempotent.
  void Shutdown(absl::Duration grace = absl::Seconds(10));

  int32_t num_device_blocks() const { return num_device_blocks_; }
  int32_t num_host_blocks() const { return num_host_blocks_; }
  int32_t vocab_size() const { return vocab_size_; }
  int32_t world_size() const { return static_cast<int32_t>(ranks_.size()); }
  const std::string& device_name() const { return device_name_; }
  // What the KV cache stores, as rank 0 reports it ("float32", "int8", ...).
  const std::string& kv_cache_dtype() const { return kv_cache_dtype_; }
  // Bytes of one KV block on one rank (all layers, K and V).
  uint64_t block_bytes() const { return block_bytes_; }
  // Per-rank timings of the last step (forward incl. all-reduce, all-reduce).
  const std::vector<double>& last_forward_seconds() const { return forward_seconds_; }
  const std::vector<double>& last_allreduce_seconds() const { return allreduce_seconds_; }

 private:
  // What a completion-queue tag stands for; the tag packs (op, rank).
  enum class Op : uintptr_t { kStart = 0, kWrite = 1, kRead = 2, kClose = 3 };

  struct Rank {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<v1::Worker::Stub> stub;
    std::unique_ptr<grpc::ClientContext> step_context;
    std::unique_ptr<grpc::ClientAsyncReaderWriter<v1::StepPlan, v1::StepResult>> step_stream;
    v1::StepResult reply;  // target of the outstanding read
    int pending = 0;       // operations started on the stream, not yet completed
  };

  explicit RemoteWorkerGroup(const Options& options) : options_(options) {}
  absl::Status Start();
  // Initialize on every rank at once (they meet in the collective group);
  // `rendezvous_prefix` names this generation of the group.
  absl::StatusOr<std::vector<v1::InitializeResponse>> InitializeAll(
      const std::string& rendezvous_prefix);
  absl::Status AllocateAll();
  // The rendezvous prefix of a group generation (0: the first).
  std::string Generation(int32_t generation) const;
  absl::Status OpenStreams();
  // A forward pass of one token on the rebuilt group, so the first real
  // step does not pay the start-up costs (as the scheduler's own warm-up).
  absl::Status WarmUp();
  // Cancels and finishes every open Step stream (after a failure).
  void CloseBrokenStreams();
  // Recent step durations and seconds per scheduled token, for StepTimeout.
  void RecordStepTime(double seconds, int64_t tokens);
  static void* Tag(Op op, size_t rank);
  // Waits until no operation is outstanding on any stream. Past `deadline`
  // every stream is cancelled (cancelled operations complete promptly).
  // Returns the first rank whose operation failed (-1: none) and whether the
  // deadline passed; cancels the other ranks' streams at the first failure.
  struct DrainResult {
    int failed_rank = -1;
    Op failed_op = Op::kStart;
    bool timed_out = false;
  };
  DrainResult Drain(absl::Time deadline);
  void CancelAll(int except_rank = -1);
  // The status that ends rank r's broken stream (Finish), as an error.
  absl::Status BrokenStream(size_t r, Op op);

  const Options options_;
  // Declared before ranks_: the streams must be destroyed before the queue.
  grpc::CompletionQueue cq_;
  std::vector<Rank> ranks_;
  int32_t num_device_blocks_ = 0;
  int32_t num_host_blocks_ = 0;
  int32_t vocab_size_ = 0;
  uint64_t block_bytes_ = 0;  // rank 0's, at Connect: a rebuilt rank must match
  std::string device_name_;
  std::string kv_cache_dtype_;
  int32_t generation_ = 0;  // rebuilds so far
  static constexpr int kStepHistory = 64;
  std::vector<double> recent_step_seconds_, recent_seconds_per_token_;  // rings
  size_t next_history_ = 0;
  absl::Time begun_at_;
  int64_t begun_prefill_tokens_ = 0;
  int64_t begun_tokens_ = 0;
  absl::Duration begun_timeout_;
  std::vector<double> forward_seconds_, allreduce_seconds_;
  bool shut_down_ = false;
  // The step between Begin and Wait.
  bool step_in_flight_ = false;
  uint64_t begun_step_id_ = 0;
  absl::Time begun_deadline_;
  // Set when a stream broke or a step timed out: every later step fails.
  absl::Status broken_;
};

}  // namespace folio

#endif  // FOLIO_SCHEDULER_SERVER_REMOTE_WORKER_GROUP_H_
