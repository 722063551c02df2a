#ifndef FOLIO_COMMON_PLAN_PROTO_H_
#define FOLIO_COMMON_PLAN_PROTO_H_

// Conversions between the C++ plan types (common/step_plan.h,
// common/sampling_params.h) and their wire form in proto/folio/v1/worker.proto.
//
// ToProto never fails: the C++ side is trusted. FromProto validates what a
// peer sent and returns INVALID_ARGUMENT naming the offending field (e.g.
// "scheduled[3].token_ids[0]: token id must be non-negative, got -1") before
// any worker state is touched. `out` is overwritten (cleared first); on error
// its contents are unspecified.
//
// Thread-safe: free functions without shared state.

#include "absl/status/status.h"
#include "common/sampling_params.h"
#include "common/step_plan.h"
#include "folio/v1/worker.pb.h"

namespace folio {

void ToProto(const SamplingParams& params, v1::SequenceSamplingParams* out);
// Also runs ValidateSamplingParams.
absl::Status FromProto(const v1::SequenceSamplingParams& in, SamplingParams* out);

void ToProto(const StepPlan& plan, v1::StepPlan* out);
absl::Status FromProto(const v1::StepPlan& in, StepPlan* out);

// Sets step_id and samples; the caller sets rank, timings and status.
void ToProto(const StepResult& result, v1::StepResult* out);
// Reads step_id and samples only (rank, timings and status are the caller's).
absl::Status FromProto(const v1::StepResult& in, StepResult* out);

// absl::Status <-> folio.v1.Status.
void ToProto(const absl::Status& status, v1::Status* out);
absl::Status FromProto(const v1::Status& in);

}  // namespace folio

#endif  // FOLIO_COMMON_PLAN_PROTO_H_
