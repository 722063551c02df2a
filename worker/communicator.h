#ifndef FOLIO_WORKER_COMMUNICATOR_H_
#define FOLIO_WORKER_COMMUNICATOR_H_

// The collectives a tensor-parallel worker rank needs, behind one interface:
// LocalCommunicator (threads in one process, for tests), GlooCommunicator
// (CPU workers over TCP), and NcclCommunicator (CUDA workers; its pointers
// are device memory, see nccl_communicator.h).
//
// Every rank of a group must call the same collectives in the same order
// with the same counts; a rank that stops calling leaves the others waiting
// until their timeout (DEADLINE_EXCEEDED or UNAVAILABLE). Collectives never
// throw; failures come back as absl::Status.
//
// The public methods time themselves: busy_seconds() is the wall time spent
// inside collectives since the last ResetBusySeconds() (StepResult's
// allreduce_seconds).
//
// Thread-compatible: one thread (the rank's worker thread) calls a
// communicator at a time; only Abort() may be called from any thread.

#include <chrono>
#include <cstdint>

#include "absl/status/status.h"

namespace folio {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int32_t rank() const = 0;
  virtual int32_t world_size() const = 0;

  // data[0:count] = sum over ranks of every rank's data[0:count]. Every rank
  // gets bit-identical results.
  absl::Status AllReduceSum(float* data, int64_t count) {
    return Timed([&] { return DoAllReduceSum(data, count); });
  }

  // Rank r sends send[0:count]; rank 0 receives every rank's, in rank order,
  // in recv[0 : count * world_size]. `recv` is unused (may be null) on other
  // ranks. count is the same on every rank.
  absl::Status GatherToRank0(const float* send, int64_t count, float* recv) {
    return Timed([&] { return DoGatherToRank0(send, count, recv); });
  }

  // Returns once every rank has called Barrier.
  absl::Status Barrier() {
    return Timed([&] { return DoBarrier(); });
  }

  // Breaks the group so that a collective blocked on a peer (this rank's or
  // any other's) returns an error promptly, and every later one fails: the
  // worker calls it before it is initialized again, when a peer died or
  // hung. Thread-safe, non-blocking, idempotent. The default does nothing:
  // a communicator whose collectives cannot be woken from another thread
  // relies on the peer's failure (a dead peer's closed sockets) or on its
  // own timeout; the blocked collective still ends, only later.
  virtual void Abort() {}

  double busy_seconds() const { return busy_seconds_; }
  void ResetBusySeconds() { busy_seconds_ = 0.0; }

 protected:
  virtual absl::Status DoAllReduceSum(float* data, int64_t count) = 0;
  virtual absl::Status DoGatherToRank0(const float* send, int64_t count, float* recv) = 0;
  virtual absl::Status DoBarrier() = 0;

 private:
  template <typename F>
  absl::Status Timed(F&& f) {
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = f();
    busy_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return s;
  }

  double busy_seconds_ = 0.0;
};

}  // namespace folio

#endif  // FOLIO_WORKER_COMMUNICATOR_H_
