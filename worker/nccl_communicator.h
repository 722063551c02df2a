#ifndef FOLIO_WORKER_NCCL_COMMUNICATOR_H_
#define FOLIO_WORKER_NCCL_COMMUNICATOR_H_

// Collectives over NCCL, for CUDA worker ranks: the Communicator of a
// `--device cuda` worker. Create() joins the group: rank 0 makes an NCCL
// unique id (ncclGetUniqueId) and publishes it in the rendezvous store under
// `unique_id_key` (the store adds its per-cluster-start prefix); every other
// rank waits for that key and reads it; then every rank initialises its
// communicator on its own device (ncclCommInitRankConfig) with a CUDA stream
// of its own. All world_size ranks must call Create() within `timeout`.
//
// DEVICE MEMORY: unlike the CPU communicators, AllReduceSum and GatherToRank0
// take pointers to device memory of this rank's device (the CUDA worker's
// activations and logits live there); host pointers are refused with
// INVALID_ARGUMENT. Each collective returns once it has completed on the
// device, so busy_seconds() is the wall time of the collective itself, and
// the result is ready for the host and every stream. REQUIRES: the work that
// wrote the input has completed or was enqueued on the legacy default stream.
//
// The NCCL calls themselves live in NcclGroup (nccl_group.h), which needs no
// absl or gRPC so that the kernels-only GPU check can run it; this class
// exchanges the id and turns NcclGroup::Status into absl::Status (messages
// name the NCCL/CUDA call and its error string). No exceptions, no aborts: a
// failed or timed-out collective comes back as a Status, after which the
// group is broken (FAILED_PRECONDITION from then on) and must be rebuilt.
//
// NCCL picks its bootstrap network interface itself; set NCCL_SOCKET_IFNAME
// where that guess is wrong (e.g. several pod interfaces).
//
// Thread-compatible: one thread calls a communicator at a time (Abort()
// excepted).

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/communicator.h"
#include "worker/nccl_group.h"

namespace folio {

class RendezvousStore;

class NcclCommunicator final : public Communicator {
 public:
  struct Options {
    int32_t rank = 0;
    int32_t world_size = 1;
    int32_t device = 0;  // CUDA device ordinal of this rank
    // Joining (the id exchange and NCCL's initialisation) and every
    // collective fail after this long.
    absl::Duration timeout = absl::Seconds(60);
    // Where rank 0 publishes the unique id, below the store's own prefix.
    std::string unique_id_key = "nccl/unique_id";
  };

  // `store` is used only during the call.
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(const Options& options,
                                                              RendezvousStore& store);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int32_t rank() const override { return group_->rank(); }
  int32_t world_size() const override { return group_->world_size(); }
  // Any thread: the collective in progress fails within a poll interval
  // (NcclGroup::RequestAbort), and so does every later one.
  void Abort() override { group_->RequestAbort(); }

 protected:
  absl::Status DoAllReduceSum(float* data, int64_t count) override;
  absl::Status DoGatherToRank0(const float* send, int64_t count, float* recv) override;
  absl::Status DoBarrier() override;

 private:
  explicit NcclCommunicator(std::unique_ptr<NcclGroup> group);

  const std::unique_ptr<NcclGroup> group_;
};

}  // namespace folio

#endif  // FOLIO_WORKER_NCCL_COMMUNICATOR_H_
