#ifndef FOLIO_WORKER_LOCAL_COMMUNICATOR_H_
#define FOLIO_WORKER_LOCAL_COMMUNICATOR_H_

// A Communicator for ranks that are threads of one process (tests, and the
// reference the Gloo communicator is checked against). Collectives meet at a
// shared barrier; sums run in rank order, so every rank gets the same bits.
// A rank that does not arrive within `timeout` breaks the group: that call
// returns DEADLINE_EXCEEDED and every later one UNAVAILABLE.
//
// Thread-safe across the group's communicators (one thread per rank);
// each communicator is thread-compatible.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "worker/communicator.h"

namespace folio {

class LocalCommunicator final : public Communicator {
 public:
  // world_size communicators of one group; element r is rank r.
  static std::vector<std::unique_ptr<LocalCommunicator>> CreateGroup(
      int32_t world_size, absl::Duration timeout = absl::Seconds(60));

  LocalCommunicator(const LocalCommunicator&) = delete;
  LocalCommunicator& operator=(const LocalCommunicator&) = delete;

  int32_t rank() const override { return rank_; }
  int32_t world_size() const override;

  struct Group;  // shared by the group's communicators

 protected:
  absl::Status DoAllReduceSum(float* data, int64_t count) override;
  absl::Status DoGatherToRank0(const float* send, int64_t count, float* recv) override;
  absl::Status DoBarrier() override;

 private:
  LocalCommunicator(std::shared_ptr<Group> group, int32_t rank);

  const std::shared_ptr<Group> group_;
  const int32_t rank_;
  std::vector<float> sum_;  // scratch for AllReduceSum
};

}  // namespace folio

#endif  // FOLIO_WORKER_LOCAL_COMMUNICATOR_H_
