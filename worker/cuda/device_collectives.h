// Tensor-parallel collectives of the CUDA model runner on DEVICE memory,
// std-only: the runner calls these, and the full build or a test supplies
// the implementation (NullCollectives for one rank; NcclCollectives over
// worker/nccl_group.h when NCCL was found).
//
// Contract of every call: `stream` is the caller's compute stream and the
// data was written by work queued on it. When the call returns OK, the
// result is ready for work queued on `stream` afterwards (an implementation
// may complete synchronously or enqueue on `stream`). Every rank must make
// the same calls with the same counts.
//
// Thread-compatible.
#ifndef FOLIO_WORKER_CUDA_DEVICE_COLLECTIVES_H_
#define FOLIO_WORKER_CUDA_DEVICE_COLLECTIVES_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/cuda/cuda_status.h"

namespace folio::gpu {

class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;

  virtual int32_t rank() const = 0;
  virtual int32_t world_size() const = 0;

  // data[0:count] = sum over ranks, in place.
  virtual CudaStatus AllReduceSum(float* data, int64_t count, cudaStream_t stream) = 0;

  // Rank r's send[0:count] lands in rank 0's recv[r * count : (r + 1) * count];
  // recv is unused (may be null) on the other ranks.
  virtual CudaStatus GatherToRank0(const float* send, int64_t count, float* recv,
                                   cudaStream_t stream) = 0;
};

// One rank: the all-reduce is the identity, the gather a device copy.
class NullCollectives final : public DeviceCollectives {
 public:
  int32_t rank() const override { return 0; }
  int32_t world_size() const override { return 1; }
  CudaStatus AllReduceSum(float*, int64_t, cudaStream_t) override { return CudaStatus::Ok(); }
  CudaStatus GatherToRank0(const float* send, int64_t count, float* recv,
                           cudaStream_t stream) override {
    if (count <= 0 || send == recv) return CudaStatus::Ok();
    return FromCuda(cudaMemcpyAsync(recv, send, sizeof(float) * size_t(count),
                                    cudaMemcpyDeviceToDevice, stream),
                    "GatherToRank0 (one rank): cudaMemcpyAsync");
  }
};

}  // namespace folio::gpu

#endif  // FOLIO_WORKER_CUDA_DEVICE_COLLECTIVES_H_
