#ifndef FOLIO_COMMON_WORKER_GROUP_H_
#define FOLIO_COMMON_WORKER_GROUP_H_

#include "absl/status/statusor.h"
#include "common/step_plan.h"

namespace folio {

// Every worker rank of one model replica, as the engine loop sees them: a
// plan goes to all ranks, rank 0's samples come back. Implemented over gRPC
// (scheduler/server/remote_worker_group.h) and in process (tests, `folio run`).
//
// A step can also be split in two, Begin (send the plan) then Wait (its
// result), so the engine streams the previous step's outputs to clients
// while the workers compute. Groups that cannot overlap (in process) run the
// plan inside Wait.
//
// Thread-compatible: the engine loop calls these from one thread.
class WorkerGroup {
 public:
  virtual ~WorkerGroup() = default;

  // Runs one plan on every rank. An error means the group is broken (a rank
  // died, timed out or failed the step) until Rebuild() succeeds.
  virtual absl::StatusOr<StepResult> Execute(const StepPlan& plan) = 0;

  // After a failed step (or health check): makes the group usable again
  // with fresh ranks -- a new collective group, empty KV caches of the same
  // sizes -- or says why not yet (the caller retries with backoff).
  // Only groups with CanRebuild() implement it.
  virtual bool CanRebuild() const { return false; }
  virtual absl::Status Rebuild() {
    return absl::UnimplementedError("this worker group cannot be rebuilt");
  }
  // Between steps, while nothing runs: OK when every rank answers; an
  // error (naming the rank) when one is gone or hung, as a failed step.
  virtual absl::Status CheckHealth() { return absl::OkStatus(); }

  // Starts `plan` on every rank; Wait() returns its result. REQUIRES: no
  // step begun and not yet waited for; `plan` outlives the Wait() call.
  virtual absl::Status Begin(const StepPlan& plan) {
    begun_ = &plan;
    return absl::OkStatus();
  }
  // The result of the plan of the last Begin(). REQUIRES: Begin() succeeded.
  virtual absl::StatusOr<StepResult> Wait() {
    const StepPlan* plan = begun_;
    begun_ = nullptr;
    return Execute(*plan);
  }

 private:
  const StepPlan* begun_ = nullptr;  // for the default Begin/Wait
};

}  // namespace folio

#endif  // FOLIO_COMMON_WORKER_GROUP_H_
