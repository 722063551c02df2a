#ifndef FOLIO_WORKER_MODEL_WORKER_H_
#define FOLIO_WORKER_MODEL_WORKER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model_config.h"
#include "common/step_plan.h"
#include "kernels/cache_layout.h"
#include "worker/model_weights.h"

namespace folio {

// One worker rank, whatever it computes on: CpuWorker (worker/cpu_worker.h)
// or CudaWorker (worker/cuda_worker.h, builds with CUDA). WorkerService
// drives it through this interface only:
//   Load (the implementation's factory) -> DeviceBlocksThatFit /
//   HostBlocksThatFit (reported to the scheduler, which takes the minimum
//   over ranks) -> AllocateCache(the scheduler's sizes) -> Execute(plan)...
// A worker decides nothing: every block id, token and position comes from
// the plan.
//
// Thread-compatible: the caller serializes every call.
class ModelWorker {
 public:
  virtual ~ModelWorker() = default;

  virtual const ModelConfig& config() const = 0;
  virtual const ShardShape& shard_shape() const = 0;
  // Bytes of one KV block on this rank (all layers, K and V) in the cache's
  // dtype.
  virtual int64_t block_bytes() const = 0;
  // Device KV blocks this rank can hold (from its options or a memory
  // profile); the scheduler takes the minimum over ranks.
  virtual int32_t DeviceBlocksThatFit() const = 0;
  // Host (swap) KV blocks this rank can hold.
  virtual int32_t HostBlocksThatFit() const = 0;
  // Allocates both pools. FAILED_PRECONDITION if allocated already;
  // INVALID_ARGUMENT for num_device_blocks <= 0 or num_host_blocks < 0.
  virtual absl::Status AllocateCache(int32_t num_device_blocks, int32_t num_host_blocks) = 0;
  // 0 before AllocateCache.
  virtual int32_t num_device_blocks() const = 0;
  virtual int32_t num_host_blocks() const = 0;

  // Cache ops, then the forward pass of every scheduled token, then samples
  // for the sequences the plan asks to sample (rank 0 only; other ranks
  // return a result with the step id and no samples).
  // REQUIRES: AllocateCache done (FAILED_PRECONDITION otherwise).
  virtual absl::StatusOr<StepResult> Execute(const StepPlan& plan) = 0;

  // What InitializeResponse.device_name reports: "cpu", or the CUDA
  // device's name (e.g. "NVIDIA H200").
  virtual std::string device_name() const = 0;
  // What the KV cache stores (InitializeResponse.kv_cache_dtype): "auto"
  // resolved, e.g. float32 on the CPU, bfloat16 or float32 on CUDA.
  virtual kernels::CacheDtype kv_cache_dtype() const = 0;
};

}  // namespace folio

#endif  // FOLIO_WORKER_MODEL_WORKER_H_
