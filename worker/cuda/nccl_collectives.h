// DeviceCollectives over NcclGroup (worker/nccl_group.h). Only built when
// CMake found NCCL (target folio_nccl_group; FOLIO_HAVE_NCCL_GROUP is then
// defined for users of folio_worker_cuda_core).
//
// NcclGroup is synchronous on a stream of its own and requires that the
// device work writing its input has completed; so each call first
// synchronizes the caller's stream, then runs the collective, which has
// completed on the device when NcclGroup returns (visible to every stream).
//
// Thread-compatible, like NcclGroup.
#ifndef FOLIO_WORKER_CUDA_NCCL_COLLECTIVES_H_
#define FOLIO_WORKER_CUDA_NCCL_COLLECTIVES_H_

#include "worker/cuda/device_collectives.h"

namespace folio {
class NcclGroup;
}

namespace folio::gpu {

class NcclCollectives final : public DeviceCollectives {
 public:
  // `group` must outlive this object.
  explicit NcclCollectives(NcclGroup& group) : group_(group) {}

  int32_t rank() const override;
  int32_t world_size() const override;
  CudaStatus AllReduceSum(float* data, int64_t count, cudaStream_t stream) override;
  CudaStatus GatherToRank0(const float* send, int64_t count, float* recv,
                           cudaStream_t stream) override;

 private:
  NcclGroup& group_;
};

}  // namespace folio::gpu

#endif  // FOLIO_WORKER_CUDA_NCCL_COLLECTIVES_H_
