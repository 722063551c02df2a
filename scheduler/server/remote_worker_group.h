#ifndef FOLIO_SCHEDULER_SERVER_REMOTE_WORKER_GROUP_H_
#define FOLIO_SCHEDULER_SERVER_REMOTE_WORKER_GROUP_H_

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
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
// Every call has a deadline; a step that overruns cancels the streams and
// fails. Thread-compatible: one thread calls Execute().
class RemoteWorkerGroup final : public WorkerGroup {
 public:
  struct Options {
    std::vector<std::string> addresses;  // rank r listens at addresses[r]
    // Sent to every rank with rank and world_size filled in.
    v1::InitializeRequest initialize;
    absl::Duration connect_timeout = absl::Seconds(120);  // workers may still be starting
    absl::Duration initialize_timeout = absl::Minutes(10);  // loading a large model
    absl::Duration step_timeout = absl::Minutes(10);
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

  // Closes the step streams and asks every rank to exit. Idempotent.
  void Shutdown(absl::Duration grace = absl::Seconds(10));

  int32_t num_device_blocks() const { return num_device_blocks_; }
  int32_t num_host_blocks() const { return num_host_blocks_; }
  int32_t vocab_size() const { return vocab_size_; }
  int32_t world_size() const { return static_cast<int32_t>(ranks_.size()); }
  const std::string& device_name() const { return device_name_; }
  // Per-rank timings of the last step (forward incl. all-reduce, all-reduce).
  const std::vector<double>& last_forward_seconds() const { return forward_seconds_; }
  const std::vector<double>& last_allreduce_seconds() const { return allreduce_seconds_; }

 private:
  struct Rank {
    std::string address;
    std::unique_ptr<v1::Worker::Stub> stub;
    std::unique_ptr<grpc::ClientContext> step_context;
    std::unique_ptr<grpc::ClientReaderWriter<v1::StepPlan, v1::StepResult>> step_stream;
  };

  explicit RemoteWorkerGroup(const Options& options) : options_(options) {}
  absl::Status Start();
  // Cancels the streams when a step runs past its deadline.
  void Watchdog();
  // Why rank r's stream broke.
  absl::Status StreamError(size_t r, const char* what);

  const Options options_;
  std::vector<Rank> ranks_;
  int32_t num_device_blocks_ = 0;
  int32_t num_host_blocks_ = 0;
  int32_t vocab_size_ = 0;
  std::string device_name_;
  std::vector<double> forward_seconds_, allreduce_seconds_;
  bool shut_down_ = false;

  std::mutex mu_;
  std::condition_variable cv_;
  absl::Time step_deadline_ = absl::InfiniteFuture();  // guarded by mu_
  bool timed_out_ = false;                               // guarded by mu_
  bool stop_watchdog_ = false;                           // guarded by mu_
  std::thread watchdog_;
};

}  // namespace folio

#endif  // FOLIO_SCHEDULER_SERVER_REMOTE_WORKER_GROUP_H_
