#include "worker/local_communicator.h"

#include <algorithm>
#include <cstring>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace folio {

struct LocalCommunicator::Group {
  Group(int32_t n, absl::Duration t) : world_size(n), timeout(t), ptrs(n, nullptr) {}

  // Returns when every rank has arrived, or fails (and breaks the group)
  // after `timeout`.
  absl::Status Arrive() {
    absl::MutexLock lock(&mu);
    if (broken) return absl::UnavailableError("local communicator group is broken");
    const uint64_t gen = generation;
    if (++arrived == world_size) {
      arrived = 0;
      ++generation;
      return absl::OkStatus();
    }
    auto released = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return generation != gen || broken;
    };
    if (!mu.AwaitWithTimeout(absl::Condition(&released), timeout)) {
      broken = true;
      return absl::DeadlineExceededError(absl::StrCat(
          "local communicator: ", world_size - arrived, " ranks did not arrive within ",
          absl::FormatDuration(timeout)));
    }
    if (generation == gen) return absl::UnavailableError("local communicator group is broken");
    return absl::OkStatus();
  }

  const int32_t world_size;
  const absl::Duration timeout;
  // Each rank's buffer for the collective in progress; written by its owner
  // before Arrive() and read by others between two Arrive()s.
  std::vector<const float*> ptrs;

  absl::Mutex mu;
  int32_t arrived ABSL_GUARDED_BY(mu) = 0;
  uint64_t generation ABSL_GUARDED_BY(mu) = 0;
  bool broken ABSL_GUARDED_BY(mu) = false;
};

std::vector<std::unique_ptr<LocalCommunicator>> LocalCommunicator::CreateGroup(
    int32_t world_size, absl::Duration timeout) {
  auto group = std::make_shared<Group>(world_size, timeout);
  std::vector<std::unique_ptr<LocalCommunicator>> out;
  for (int32_t r = 0; r < world_size; ++r) {
    out.push_back(std::unique_ptr<LocalCommunicator>(new LocalCommunicator(group, r)));
  }
  return out;
}

LocalCommunicator::LocalCommunicator(std::shared_ptr<Group> group, int32_t rank)
    : group_(std::move(group)), rank_(rank) {}

int32_t LocalCommunicator::world_size() const { return group_->world_size; }

absl::Status LocalCommunicator::DoAllReduceSum(float* data, int64_t count) {
  group_->ptrs[rank_] = data;
  if (absl::Status s = group_->Arrive(); !s.ok()) return s;
  sum_.assign(group_->ptrs[0], group_->ptrs[0] + count);
  for (int32_t r = 1; r < group_->world_size; ++r) {
    const float* p = group_->ptrs[r];
    for (int64_t i = 0; i < count; ++i) sum_[i] += p[i];
  }
  // Nobody writes its buffer until every rank has read them all.
  if (absl::Status s = group_->Arrive(); !s.ok()) return s;
  if (count > 0) std::memcpy(data, sum_.data(), sizeof(float) * count);
  return absl::OkStatus();
}

absl::Status LocalCommunicator::DoGatherToRank0(const float* send, int64_t count, float* recv) {
  group_->ptrs[rank_] = send;
  if (absl::Status s = group_->Arrive(); !s.ok()) return s;
  if (rank_ == 0 && count > 0) {
    for (int32_t r = 0; r < group_->world_size; ++r) {
      std::memcpy(recv + r * count, group_->ptrs[r], sizeof(float) * count);
    }
  }
  return group_->Arrive();
}

absl::Status LocalCommunicator::DoBarrier() { return group_->Arrive(); }

}  // namespace folio
