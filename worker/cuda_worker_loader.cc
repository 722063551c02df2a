// LoadCudaWorker (worker/worker_loader.h): a CudaWorker, and its NCCL
// communicator for tensor parallelism, from an InitializeRequest.

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/cuda_worker.h"
#include "worker/device_spec.h"
#include "worker/rendezvous_store.h"
#include "worker/worker_loader.h"
#if defined(FOLIO_HAVE_NCCL_COMMUNICATOR)
#include "worker/nccl_communicator.h"
#endif

namespace folio {

absl::StatusOr<LoadedWorker> LoadCudaWorker(const v1::InitializeRequest& request,
                                            const CudaLoadOptions& options) {
  const std::string field = absl::StrCat("InitializeRequest.device \"", request.device(), "\"");
  absl::StatusOr<DeviceSpec> spec = ParseDevice(request.device());
  if (!spec.ok()) return spec.status();
  if (!spec->is_cuda()) return absl::InvalidArgumentError(absl::StrCat(field, " is not cuda"));
  absl::StatusOr<int32_t> count = CudaWorker::DeviceCount();
  if (!count.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(field, ": ", count.status().message()));
  }
  const int32_t world = request.world_size() == 0 ? 1 : static_cast<int32_t>(request.world_size());
  const int32_t rank = static_cast<int32_t>(request.rank());
  const int32_t ordinal = spec->ordinal >= 0 ? spec->ordinal : rank % *count;
  if (ordinal >= *count) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": this machine has ", *count, " CUDA device(s)"));
  }

  CudaWorker::Options wo;
  switch (request.dtype()) {
    case v1::DTYPE_UNSPECIFIED:
    case v1::DTYPE_BFLOAT16:
      wo.dtype = CudaWorker::Dtype::kBFloat16;
      break;
    case v1::DTYPE_FLOAT32:
      wo.dtype = CudaWorker::Dtype::kFloat32;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "InitializeRequest.dtype ", v1::DType_Name(request.dtype()),
          ": the CUDA worker computes in bfloat16 (the default) or float32"));
  }
  const float utilization = request.memory_utilization();
  if (!(utilization >= 0.0f && utilization <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "InitializeRequest.memory_utilization ", utilization, " is not in (0, 1] (0 = 0.9)"));
  }
  wo.model_dir = request.model_path();
  wo.shard = ShardSpec{rank, world};
  wo.device = ordinal;
  wo.block_size = request.block_size() == 0 ? 16 : static_cast<int32_t>(request.block_size());
  wo.kv_cache_bytes = static_cast<int64_t>(request.kv_cache_bytes());
  wo.memory_utilization = utilization > 0.0f ? utilization : 0.9;
  wo.swap_space_bytes = static_cast<int64_t>(request.swap_space_bytes());
  wo.max_model_len = static_cast<int32_t>(request.max_model_len());
  if (request.max_num_batched_tokens() > 0) {
    wo.max_num_batched_tokens = static_cast<int32_t>(request.max_num_batched_tokens());
  }
  if (request.max_num_seqs() > 0) wo.max_num_seqs = static_cast<int32_t>(request.max_num_seqs());
  wo.seed = options.seed;

  LoadedWorker loaded;
  if (world > 1) {
#if defined(FOLIO_HAVE_NCCL_COMMUNICATOR)
    if (request.rendezvous_address().empty()) {
      return absl::InvalidArgumentError("world_size > 1 needs a rendezvous_address");
    }
    RendezvousStore::Options so;
    so.address = request.rendezvous_address();
    so.prefix = absl::StrCat(request.rendezvous_prefix(), "/cuda/");
    so.timeout = options.collective_timeout;
    absl::StatusOr<std::unique_ptr<RendezvousStore>> store = RendezvousStore::Create(so);
    if (!store.ok()) return store.status();
    NcclCommunicator::Options no;
    no.rank = rank;
    no.world_size = world;
    no.device = ordinal;
    no.timeout = options.collective_timeout;
    absl::StatusOr<std::unique_ptr<Communicator>> comm = NcclCommunicator::Create(no, **store);
    if (!comm.ok()) return comm.status();
    loaded.communicator = std::move(*comm);
#else
    return absl::FailedPreconditionError(absl::StrCat(
        field, " with world_size ", world,
        ": tensor parallelism on CUDA needs NCCL, which this folio-worker was built without"));
#endif
  }
  wo.communicator = loaded.communicator.get();
  absl::StatusOr<std::unique_ptr<CudaWorker>> worker = CudaWorker::Load(wo);
  if (!worker.ok()) return worker.status();
  loaded.worker = std::move(*worker);
  return loaded;
}

}  // namespace folio
