#ifndef FOLIO_WORKER_WORKER_LOADER_H_
#define FOLIO_WORKER_WORKER_LOADER_H_

// How WorkerService gets a worker for a CUDA Initialize without depending on
// CUDA itself: folio-worker (built with CUDA) hands the service
// LoadCudaWorker through WorkerService::Options::cuda_loader; a build without
// CUDA leaves it unset and such requests fail with FAILED_PRECONDITION.

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "folio/v1/worker.pb.h"
#include "worker/communicator.h"
#include "worker/model_worker.h"

namespace folio {

// What Initialize builds for one rank. The communicator (null for one rank)
// outlives the worker: members are destroyed in reverse order.
struct LoadedWorker {
  std::unique_ptr<Communicator> communicator;
  std::unique_ptr<ModelWorker> worker;
};

struct CudaLoadOptions {
  uint64_t seed = 0;  // sampling seed for requests without their own
  // Joining the NCCL group (ranks > 1) and every collective.
  absl::Duration collective_timeout = absl::Seconds(120);
};

using CudaWorkerLoader = std::function<absl::StatusOr<LoadedWorker>(
    const v1::InitializeRequest& request, const CudaLoadOptions& options)>;

// Builds the CudaWorker of `request` (device "cuda" or "cuda:N"): checks
// that a CUDA device exists (FAILED_PRECONDITION naming the `device` field
// otherwise) and N is one of them (INVALID_ARGUMENT), picks the dtype
// (UNSPECIFIED or BFLOAT16: bfloat16 weights and cache; FLOAT32: float32;
// FLOAT16: INVALID_ARGUMENT), joins the NCCL group through the rendezvous
// store when world_size > 1 (all ranks concurrently), then loads this rank's
// shard and sizes its KV cache (kv_cache_bytes when > 0, else a memory
// profile at memory_utilization, 0 meaning 0.9).
// Defined only in builds with CUDA (library folio_worker_cuda, where
// FOLIO_HAVE_CUDA_WORKER is defined for its users).
absl::StatusOr<LoadedWorker> LoadCudaWorker(const v1::InitializeRequest& request,
                                            const CudaLoadOptions& options);

}  // namespace folio

#endif  // FOLIO_WORKER_WORKER_LOADER_H_
