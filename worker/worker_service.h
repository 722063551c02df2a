#ifndef FOLIO_WORKER_WORKER_SERVICE_H_
#define FOLIO_WORKER_WORKER_SERVICE_H_

// folio.v1.Worker over a ModelWorker: one process per tensor-parallel rank.
// InitializeRequest.device picks it: "cpu" (or empty) a CpuWorker, "cuda" or
// "cuda:N" a CudaWorker through Options::cuda_loader (set by folio-worker in
// builds with CUDA; without it such requests fail with FAILED_PRECONDITION,
// as do requests on machines without a CUDA device).
//
//   Initialize     loads this rank's shard, joins the collective group
//                  (through the scheduler's Rendezvous service: shared memory
//                  when every rank is on this host, else Gloo over TCP, see
//                  Options::collectives; blocks until every rank has joined,
//                  so the scheduler must call Initialize on all ranks
//                  concurrently; CUDA ranks join NCCL instead), and reports how many KV blocks fit in
//                  kv_cache_bytes / swap_space_bytes.
//                  Called again on a loaded or ready worker (the scheduler
//                  rebuilding the group after a rank failed, with a new
//                  rendezvous_prefix), it first aborts the current group (a
//                  step blocked in a collective fails), waits up to
//                  collective_timeout for the step in flight to end and the
//                  Step stream to close (the scheduler cancels it; past that:
//                  UNAVAILABLE, nothing changed but the aborted group), frees
//                  the worker and the group, then loads as the first time.
//                  Refused while another Initialize runs.
//   AllocateCache  allocates both pools with the sizes the scheduler chose.
//   Step           bidirectional stream: one StepResult per StepPlan, in
//                  order. Rank 0 returns the samples; every rank returns
//                  forward_seconds and allreduce_seconds. A plan that fails
//                  (validation or execution) yields a StepResult carrying the
//                  status, and the stream keeps serving. One stream at a time.
//                  While Initialize runs again, the next plan ends the
//                  stream (UNAVAILABLE).
//   Shutdown       waits up to grace_seconds for the step in flight, frees the
//                  cache, leaves the group, calls Options::on_shutdown (the
//                  process then stops its server) and answers.
//
// Errors: gRPC status codes are absl::StatusCode values.
// Thread-safe: handlers run on gRPC's threads; Step execution is serialized.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "folio/v1/worker.grpc.pb.h"
#include "worker/communicator.h"
#include "worker/cpu_worker.h"
#include "worker/model_worker.h"
#include "worker/worker_loader.h"
#include "worker/worker_metrics.h"

namespace folio {

// Message size bound for the worker's server and its clients' channels.
inline constexpr int kMaxWorkerMessageBytes = 64 << 20;

class WorkerService final : public v1::Worker::Service {
 public:
  struct Options {
    // Where this rank listens for its collective peers (Gloo TCP): an
    // address peers can reach, or a network interface name in
    // collective_iface instead.
    std::string collective_host = "127.0.0.1";
    std::string collective_iface;
    // Connecting the group and every collective fail after this long.
    absl::Duration collective_timeout = absl::Seconds(120);
    // Which collectives the group uses (every rank must agree):
    //   kAuto  shared memory (ShmCommunicator) when every rank reports the
    //          same ShmCommunicator::HostIdentity() through the rendezvous
    //          store, else Gloo;
    //   kGloo  Gloo over TCP (collective_host / collective_iface);
    //   kShm   shared memory; fails to join across hosts.
    enum class Collectives { kAuto, kGloo, kShm };
    Collectives collectives = Collectives::kAuto;
    uint64_t seed = 0;  // sampling seed for requests without their own
    // Called once, by the first Close() (the Shutdown RPC closes, then
    // answers): it should only tell the server's owner to stop the server
    // (grpc::Server::Shutdown with a deadline lets the answer go out).
    std::function<void()> on_shutdown;
    // Step time, collective time and swap bytes of every step, labelled with
    // the model (directory name) and rank Initialize brings. Not owned; must
    // outlive the service. Null: no metrics.
    WorkerMetrics* metrics = nullptr;
    // Builds the worker of a "cuda"/"cuda:N" Initialize: LoadCudaWorker
    // (worker/worker_loader.h) in builds with CUDA. Empty: such requests
    // fail with FAILED_PRECONDITION naming the device field.
    CudaWorkerLoader cuda_loader;
  };

  explicit WorkerService(Options options);
  ~WorkerService() override;
  WorkerService(const WorkerService&) = delete;
  WorkerService& operator=(const WorkerService&) = delete;

  grpc::Status Initialize(grpc::ServerContext* context, const v1::InitializeRequest* request,
                          v1::InitializeResponse* response) override;
  grpc::Status AllocateCache(grpc::ServerContext* context,
                             const v1::AllocateCacheRequest* request,
                             v1::AllocateCacheResponse* response) override;
  grpc::Status Step(grpc::ServerContext* context,
                    grpc::ServerReaderWriter<v1::StepResult, v1::StepPlan>* stream) override;
  grpc::Status Shutdown(grpc::ServerContext* context, const v1::ShutdownRequest* request,
                        v1::ShutdownResponse* response) override;

  // Refuses new work, waits up to `grace` for the step in flight, frees the
  // worker and the group. Idempotent. Returns whether the step in flight (if
  // any) finished within `grace`.
  bool Close(absl::Duration grace);

 private:
  enum class State { kNew, kLoaded, kReady, kClosed };

  // Joins the collective group of `world` ranks (Options::collectives);
  // logs the choice to stderr.
  absl::StatusOr<std::unique_ptr<Communicator>> JoinGroup(const v1::InitializeRequest& request,
                                                          int32_t rank, int32_t world);
  // Initialize from state kNew: checks the request, loads the worker, joins
  // the group, fills `response`; kLoaded on success.
  grpc::Status Load(const v1::InitializeRequest& request, v1::InitializeResponse* response);
  // Back from kLoaded / kReady to kNew for a second Initialize: aborts the
  // group, waits for the step in flight and the Step stream to end, frees
  // the worker and the group.
  absl::Status Unload();
  // OK when a Step stream may run a plan now, else why not.
  grpc::Status StepRefusal() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The CPU path of Initialize: joins the group (world > 1) into *comm,
  // then loads this rank's CpuWorker with a KV cache of `kv_cache_dtype`
  // (the request's kv_cache_dtype, parsed by Load).
  absl::StatusOr<std::unique_ptr<CpuWorker>> LoadCpuWorker(const v1::InitializeRequest& request,
                                                           uint32_t world,
                                                           kernels::CacheDtype kv_cache_dtype,
                                                           std::unique_ptr<Communicator>* comm);
  // Runs one plan; always returns a result (with a status on failure).
  void RunStep(const v1::StepPlan& plan, v1::StepResult* result);

  const Options options_;

  absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kNew;
  bool initializing_ ABSL_GUARDED_BY(mu_) = false;
  bool stream_open_ ABSL_GUARDED_BY(mu_) = false;
  bool in_flight_ ABSL_GUARDED_BY(mu_) = false;
  uint32_t rank_ ABSL_GUARDED_BY(mu_) = 0;
  // Set by Initialize; used without mu_ by the one Step stream while
  // in_flight_ (Close and a second Initialize wait for it before freeing
  // them; the latter may call comm_->Abort(), which is thread-safe, first).
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<ModelWorker> worker_;
  // A CPU worker's step time by part, when there are metrics: summed here
  // for the life of the service (across Initializes), read after each step
  // by the Step stream's thread.
  StepProfile step_profile_;
};

}  // namespace folio

#endif  // FOLIO_WORKER_WORKER_SERVICE_H_
