#ifndef FOLIO_WORKER_SHM_COMMUNICATOR_H_
#define FOLIO_WORKER_SHM_COMMUNICATOR_H_

// Collectives for ranks on one host (processes or threads) over a POSIX
// shared-memory segment, instead of Gloo's TCP round trips.
//
// Joining: rank 0 creates a uniquely named segment (shm_open O_EXCL, mode
// 0600; kSegmentPrefix + pid + random), publishes its name in the rendezvous
// store under "shm/segment", and every other rank opens and maps it; after
// a first barrier (every rank mapped, or the timeout) the name is unlinked
// (by every rank; the first wins), so no segment outlives the group even if
// a process dies later. All
// world_size ranks must call Create() with the same store within `timeout`.
//
// Layout: a header (barrier words, per-rank pid / arrival counters) and two
// phases of world_size slots of `slot_bytes` each. A collective copies this
// rank's data (in chunks of slot_bytes) into its slot of the current phase,
// meets the others at one barrier, then reads what it needs: AllReduceSum
// sums every slot in rank order (s0 + s1 + ... element by element, the same
// operations on every rank, so every rank gets the same bits), GatherToRank0
// has rank 0 copy every slot out. The next barrier uses the other phase, so
// a rank may refill its slot while slower ranks still read the previous
// phase: one barrier per chunk, none to release the slots.
//
// Barrier: a shared arrival counter and a generation word. Waiters spin
// (with a CPU pause) for `spin`, then sleep in FUTEX_WAIT on the generation
// word; the last arriver bumps it and FUTEX_WAKEs only when someone sleeps.
// Every wait has the collective's deadline: a peer that stops calling gives
// DEADLINE_EXCEEDED naming the collective and the ranks that did not arrive;
// a peer process that exited (checked every few ms while asleep, through
// /proc/<pid>/stat when it shares our pid namespace) gives UNAVAILABLE at
// once. Either breaks the group: every later collective on any rank returns
// UNAVAILABLE. So does Abort() (from any thread), which also wakes the
// waiters at once.
//
// Thread-compatible: one thread calls a communicator at a time (Abort()
// excepted); the ranks' communicators may live in different processes or
// threads.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/communicator.h"

namespace gloo::rendezvous {
class Store;
}  // namespace gloo::rendezvous

namespace folio {

class ShmCommunicator final : public Communicator {
 public:
  // Every segment's name starts with this (in /dev/shm without the '/').
  static constexpr char kSegmentPrefix[] = "/folio-shm-";
  static constexpr int32_t kMaxRanks = 64;

  struct Options {
    int32_t rank = 0;
    int32_t world_size = 1;
    // Joining the group and every collective fail after this long.
    absl::Duration timeout = absl::Seconds(60);
    // Bytes of one rank's slot per phase; larger tensors go in chunks.
    // Rounded up to 64. The segment holds 2 * world_size slots.
    int64_t slot_bytes = int64_t{1} << 20;
    // Busy-wait this long at a barrier before sleeping on the futex.
    absl::Duration spin = absl::Microseconds(50);
  };

  // `store` is used only during the call (key "shm/segment"; give it a
  // prefix unique per cluster start). Errors: INVALID_ARGUMENT (options),
  // DEADLINE_EXCEEDED (a peer did not join in time), FAILED_PRECONDITION /
  // INTERNAL (the segment cannot be created or opened: another host, or
  // another IPC namespace).
  static absl::StatusOr<std::unique_ptr<ShmCommunicator>> Create(const Options& options,
                                                                 gloo::rendezvous::Store& store);
  ~ShmCommunicator() override;  // unmaps; the name is gone already
  ShmCommunicator(const ShmCommunicator&) = delete;
  ShmCommunicator& operator=(const ShmCommunicator&) = delete;

  int32_t rank() const override { return options_.rank; }
  int32_t world_size() const override { return options_.world_size; }

  // What ranks compare to decide they can share memory: the host name, the
  // kernel's boot id (/proc/sys/kernel/random/boot_id) and this process's
  // IPC and pid namespaces. Equal strings: same kernel, same /dev/shm
  // namespace, pids that mean the same process.
  static std::string HostIdentity();

  // The segment's name (already unlinked when Create returns; empty for one
  // rank); for tests.
  const std::string& segment_name() const { return name_; }

  // Breaks the group for every rank and wakes its waiters (UNAVAILABLE).
  void Abort() override;

 protected:
  absl::Status DoAllReduceSum(float* data, int64_t count) override;
  absl::Status DoGatherToRank0(const float* send, int64_t count, float* recv) override;
  absl::Status DoBarrier() override;

 private:
  struct Header;
  ShmCommunicator(const Options& options, void* base, int64_t bytes);
  absl::Status Join(const char* what, absl::Time deadline);
  // One barrier round; flips the phase. `what` names the collective.
  absl::Status Arrive(const char* what, absl::Time deadline);
  absl::Status Broken(const char* what) const;
  void Break();
  float* Slot(int phase, int32_t rank) const;

  const Options options_;
  void* const base_;     // the mapping
  const int64_t bytes_;  // its length
  Header* const header_;
  std::string name_;
  uint32_t round_ = 0;   // barrier rounds done by this rank
  uint64_t pid_ns_ = 0;  // this process's pid namespace inode
};

}  // namespace folio

#endif  // FOLIO_WORKER_SHM_COMMUNICATOR_H_
