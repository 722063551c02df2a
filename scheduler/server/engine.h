#ifndef FOLIO_SCHEDULER_SERVER_ENGINE_H_
#define FOLIO_SCHEDULER_SERVER_ENGINE_H_

#include <condition_variable>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/tokenizer.h"
#include "common/worker_group.h"
#include "folio/v1/generation.pb.h"
#include "scheduler/scheduler.h"
#include "scheduler/server/generate_request.h"
#include "scheduler/server/request_stream.h"

namespace folio {

class SchedulerMetrics;

// Receives one request's stream. Called on the engine thread, so it must not
// block: enqueue and return. Exactly one of: zero or more OnResponse then
// one OnResponse holding Finished; or one OnError before any response (the
// request was refused, e.g. INVALID_ARGUMENT from the scheduler's checks).
class GenerateSink {
 public:
  virtual ~GenerateSink() = default;
  virtual void OnResponse(v1::GenerateResponse response) = 0;
  virtual void OnError(absl::Status status) = 0;
};

// What the engine does with running requests when its worker group fails.
enum class WorkerFailurePolicy {
  kRequeue,  // preempt them by recompute; they resume once the group is rebuilt
  kFail,     // end them at once with the error
};

// Point-in-time figures of the engine, refreshed after every step.
struct EngineSnapshot {
  int64_t num_steps = 0;
  int32_t num_live_requests = 0;  // submitted and not finished
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int64_t num_waiting_tokens = 0;  // tokens the waiting requests will compute
  int32_t num_swapped = 0;
  int32_t num_free_device_blocks = 0;
  int32_t num_free_host_blocks = 0;
  int64_t num_preemptions = 0;  // recompute + swap, since start
};

// The engine loop of folio-scheduler: one thread that admits new requests,
// schedules a step, sends the plan to the worker group, applies the
// results, and streams deltas (detokenized, stop strings matched) to each
// request's sink. gRPC handlers only enqueue work (Submit, Abort) and never
// wait for a step.
//
// Thread-safe: Submit, Abort and the accessors may be called from any thread.
class Engine {
 public:
  struct Options {
    SchedulerConfig scheduler;  // block counts from the worker group
    std::string model_name;
    int32_t tensor_parallel_size = 1;
    // What the workers' KV cache stores (ModelInfo.kv_cache_dtype), e.g.
    // "float32" or "int8"; empty = not reported.
    std::string kv_cache_dtype;
    // Updated by the engine thread every step; not owned, must outlive the
    // engine. Null: no metrics.
    SchedulerMetrics* metrics = nullptr;
    // Called once, on the engine thread, when the worker group fails and
    // cannot be rebuilt (in-process groups): the engine stops serving.
    std::function<void(const absl::Status&)> on_failure;
    // A group that can rebuild (WorkerGroup::Rebuild) is rebuilt after a
    // failed step or idle health check, retried with backoff while requests
    // keep queueing. Its running and swapped requests are requeued by
    // recompute (kRequeue; one lost a (max_requeues + 1)-th time fails) or
    // fail at once (kFail); waiting ones stay queued either way.
    WorkerFailurePolicy on_worker_failure = WorkerFailurePolicy::kRequeue;
    int32_t max_requeues = 2;
    absl::Duration rebuild_backoff_initial = absl::Milliseconds(200);
    absl::Duration rebuild_backoff_max = absl::Seconds(5);
    // How often idle workers are health-checked (WorkerGroup::CheckHealth),
    // so a rank that dies while nothing runs is noticed before the next
    // request. Zero: never.
    absl::Duration health_check_interval = absl::Seconds(2);
    // Called on the engine thread when a failure stops serving for a
    // rebuild (false, with the cause) and when serving resumes (true).
    std::function<void(bool serving, const absl::Status& cause)> on_serving_changed;
    // Overload bounds on requests not yet running (queued in the engine or
    // the scheduler) and on their prompt tokens: beyond either, Submit is
    // RESOURCE_EXHAUSTED. 0 = no bound.
    int32_t max_waiting_requests = 0;
    int64_t max_waiting_tokens = 0;
    // Tokens a stream's chunks are held for before they are sent (the first
    // token and a sequence's end go out at once): 1 = every step's tokens
    // at once. RequestStream says how.
    int32_t stream_interval = 1;
  };

  // Takes ownership of everything; `limits` describe the served model.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const Options& options,
                                                        std::unique_ptr<Tokenizer> tokenizer,
                                                        const RequestLimits& limits,
                                                        std::unique_ptr<WorkerGroup> workers);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine();  // Shutdown()

  // Starts the loop thread.
  void Start();
  // Aborts every live request (their streams end with FINISH_REASON_ABORT),
  // finishes the step in flight and joins the loop thread. Idempotent.
  void Shutdown();
  // The first half of a graceful shutdown: new requests get UNAVAILABLE
  // ("draining"), live ones go on (WaitIdle tells when they are done).
  void StopAccepting();

  // Validates and queues a request; returns its id. INVALID_ARGUMENT naming
  // the field; ALREADY_EXISTS for the id of a live request; UNAVAILABLE when
  // the engine is shut down or its workers failed; RESOURCE_EXHAUSTED
  // ("overloaded: ...") beyond max_waiting_requests / max_waiting_tokens.
  // `sink` is kept until the request's Finished (or OnError) has been delivered.
  absl::StatusOr<std::string> Submit(const v1::GenerateRequest& request,
                                     std::shared_ptr<GenerateSink> sink);

  // Ends a live request; its stream ends with FINISH_REASON_ABORT. False
  // when no live request has that id.
  bool Abort(const std::string& request_id);

  v1::ModelInfo ModelInfo() const;
  // What the front ends need to format output themselves (both immutable).
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const RequestLimits& limits() const { return limits_; }
  std::vector<TokenId> Tokenize(const std::string& text, bool add_special_tokens) const;
  // The text of `ids` (invalid UTF-8 as U+FFFD). INVALID_ARGUMENT naming
  // "token_ids[i]" for an id outside the model's vocabulary. Thread-safe.
  absl::StatusOr<std::string> Detokenize(std::span<const TokenId> ids,
                                         bool skip_special_tokens) const;
  // False while the worker group is rebuilt, and for good once it has
  // failed beyond repair or the engine is draining or shutting down.
  bool healthy() const;
  EngineSnapshot Snapshot() const;
  // After Shutdown(): OK when every KV block is back in its pool and the
  // KV invariants hold; otherwise INTERNAL saying what leaked.
  absl::Status CheckDrained() const;
  // Waits until no request is live; false at the deadline.
  bool WaitIdle(absl::Duration timeout) const;

 private:
  struct Submitted {
    RequestId id;
    std::string public_id;
    ParsedRequest parsed;
    int64_t submit_ns = 0;  // steady clock
  };

  Engine(const Options& options, std::unique_ptr<Tokenizer> tokenizer, const RequestLimits& limits,
         std::unique_ptr<WorkerGroup> workers, std::unique_ptr<Scheduler> scheduler);

  // RESOURCE_EXHAUSTED when one more waiting request of `prompt_tokens`
  // would pass a bound.
  absl::Status CheckOverload(int64_t prompt_tokens) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Loop();
  // Moves the inbox into the scheduler; false when the loop should exit.
  // With `wait`, first sleeps until there is work (or, idle, until the next
  // health check is due: then *check_health is set).
  bool TakeWork(bool wait = true, bool* check_health = nullptr);
  void Admit(Submitted submitted);
  // What stop strings ended: a sequence (index >= 0) for the caller to stop
  // in the scheduler, or every sequence (index -1) to abort the request.
  struct StoppedByText {
    RequestId request_id;
    int32_t index;
  };
  // `now_ns`: the end of the step that made it (steady clock), for metrics.
  // What its stop strings ended is added to *stopped.
  void Deliver(const RequestOutput& output, int64_t now_ns, std::vector<StoppedByText>* stopped);
  // Metrics: the queue time of requests this plan schedules for the first
  // time, and the latencies an output completes.
  void RecordScheduled(const StepPlan& plan, int64_t start_ns);
  void RecordOutput(RequestStream& stream, const RequestOutput& output, int64_t now_ns);
  // Stops serving after a worker failure: every live request ends with an error.
  void FailAll(const absl::Status& status);
  // A failed step or health check. Requeues (or fails) what ran and
  // rebuilds the group; false when the loop must end (shutting down, or a
  // group that cannot rebuild: then every request has failed).
  bool RecoverWorkers(const absl::Status& cause, std::vector<StoppedByText>* stopped);
  // Retries Rebuild() with backoff, admitting and aborting meanwhile;
  // false when shut down first.
  bool RebuildWorkers();
  void DeliverBetweenSteps(std::vector<StoppedByText>* stopped);
  void Forget(RequestId id, const std::string& public_id);
  void PublishSnapshot();
  // No worker failure so far (after one, the scheduler's state is abandoned).
  bool FailureFree() const;

  // Const after construction.
  const Options options_;
  const std::unique_ptr<Tokenizer> tokenizer_;
  const RequestLimits limits_;

  // Engine thread only.
  std::unique_ptr<WorkerGroup> workers_;
  std::unique_ptr<Scheduler> scheduler_;
  absl::flat_hash_map<RequestId, std::unique_ptr<RequestStream>> streams_;
  std::thread loop_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;  // work arrived, or a request finished
  std::vector<Submitted> inbox_ ABSL_GUARDED_BY(mu_);
  // Waiting requests the snapshot does not count yet: those in inbox_, and
  // those the engine thread has moved to the scheduler since the last snapshot.
  struct Queued {
    int64_t requests = 0;
    int64_t tokens = 0;
  };
  Queued in_inbox_ ABSL_GUARDED_BY(mu_);
  Queued moved_since_snapshot_ ABSL_GUARDED_BY(mu_);
  std::vector<RequestId> aborts_ ABSL_GUARDED_BY(mu_);
  // Live requests: public id -> engine id, and the sinks until delivery.
  absl::flat_hash_map<std::string, RequestId> live_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<RequestId, std::shared_ptr<GenerateSink>> sinks_ ABSL_GUARDED_BY(mu_);
  RequestId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool rebuilding_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  EngineSnapshot snapshot_ ABSL_GUARDED_BY(mu_);
};

}  // namespace folio

#endif  // FOLIO_SCHEDULER_SERVER_ENGINE_H_
