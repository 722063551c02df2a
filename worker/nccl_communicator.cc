#include "worker/nccl_communicator.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/rendezvous_store.h"

namespace folio {
namespace {

absl::Status ToAbsl(const NcclGroup::Status& s) {
  using Code = NcclGroup::Status::Code;
  switch (s.code) {
    case Code::kOk:
      return absl::OkStatus();
    case Code::kInvalidArgument:
      return absl::InvalidArgumentError(s.message);
    case Code::kFailedPrecondition:
      return absl::FailedPreconditionError(s.message);
    case Code::kDeadlineExceeded:
      return absl::DeadlineExceededError(s.message);
    case Code::kUnavailable:
      return absl::UnavailableError(s.message);
    case Code::kInternal:
      break;
  }
  return absl::InternalError(s.message);
}

absl::Status Annotate(const absl::Status& s, const std::string& what) {
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> NcclCommunicator::Create(const Options& options,
                                                                      RendezvousStore& store) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank must be in [0, world_size), got rank ",
                                                   options.rank, " of ", options.world_size));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("NCCL communicator: timeout must be positive");
  }
  const std::string what = absl::StrCat("NCCL unique id ", store.prefix(), options.unique_id_key);

  // Exchange the unique id: rank 0 makes and publishes it, the others wait.
  std::string unique_id;
  if (options.rank == 0) {
    if (absl::Status s = ToAbsl(NcclGroup::NewUniqueId(&unique_id)); !s.ok()) return s;
    if (absl::Status s = store.Set(options.unique_id_key, unique_id); !s.ok()) {
      return Annotate(s, absl::StrCat("publishing ", what));
    }
  } else {
    if (absl::Status s = store.Wait({options.unique_id_key}, options.timeout); !s.ok()) {
      return Annotate(s, absl::StrCat("waiting for ", what));
    }
    absl::StatusOr<std::string> id = store.Get(options.unique_id_key);
    if (!id.ok()) return Annotate(id.status(), absl::StrCat("reading ", what));
    unique_id = *std::move(id);
  }

  NcclGroup::Options group_options;
  group_options.rank = options.rank;
  group_options.world_size = options.world_size;
  group_options.device = options.device;
  group_options.timeout = absl::ToChronoMilliseconds(options.timeout);
  std::unique_ptr<NcclGroup> group;
  if (absl::Status s = ToAbsl(NcclGroup::Create(group_options, unique_id, &group)); !s.ok()) {
    return s;
  }
  return std::unique_ptr<Communicator>(new NcclCommunicator(std::move(group)));
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<NcclGroup> group) : group_(std::move(group)) {}

NcclCommunicator::~NcclCommunicator() = default;

absl::Status NcclCommunicator::DoAllReduceSum(float* data, int64_t count) {
  return ToAbsl(group_->AllReduceSum(data, count));
}

absl::Status NcclCommunicator::DoGatherToRank0(const float* send, int64_t count, float* recv) {
  return ToAbsl(group_->GatherToRank0(send, count, recv));
}

absl::Status NcclCommunicator::DoBarrier() { return ToAbsl(group_->Barrier()); }

}  // namespace folio
