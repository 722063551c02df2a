#ifndef FOLIO_COMMON_WORKER_GROUP_H_
#define FOLIO_COMMON_WORKER_GROUP_H_

#include "absl/status/statusor.h"
#include "common/step_plan.h"

namespace folio {

// Every worker rank of one model replica, as the engine loop sees them: a
// plan goes to all ranks, rank 0's samples come back. Implemented over gRPC
// (scheduler/server/remote_worker_group.h) and in process (tests, `folio run`).
//
// Thread-compatible: the engine loop calls Execute() from one thread.
class WorkerGroup {
 public:
  virtual ~WorkerGroup() = default;

  // Runs one plan on every rank. An error means the group is broken (a rank
  // died, timed out or failed the step); the engine stops using it.
  virtual absl::StatusOr<StepResult> Execute(const StepPlan& plan) = 0;
};

}  // namespace folio

#endif  // FOLIO_COMMON_WORKER_GROUP_H_
