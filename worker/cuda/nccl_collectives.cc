#include "worker/cuda/nccl_collectives.h"

#include <string>

#include "worker/nccl_group.h"

namespace folio::gpu {
namespace {

CudaStatus FromNccl(const NcclGroup::Status& s) {
  if (s.ok()) return CudaStatus::Ok();
  if (s.code == NcclGroup::Status::Code::kInvalidArgument) {
    return CudaStatus::InvalidArgument(s.message);
  }
  return CudaStatus::Internal(s.message);
}

}  // namespace

int32_t NcclCollectives::rank() const { return group_.rank(); }
int32_t NcclCollectives::world_size() const { return group_.world_size(); }

CudaStatus NcclCollectives::AllReduceSum(float* data, int64_t count, cudaStream_t stream) {
  FOLIO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "AllReduceSum: cudaStreamSynchronize");
  return FromNccl(group_.AllReduceSum(data, count));
}

CudaStatus NcclCollectives::GatherToRank0(const float* send, int64_t count, float* recv,
                                          cudaStream_t stream) {
  FOLIO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream),
                             "GatherToRank0: cudaStreamSynchronize");
  return FromNccl(group_.GatherToRank0(send, count, recv));
}

}  // namespace folio::gpu
