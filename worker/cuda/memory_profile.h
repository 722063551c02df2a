// How many KV cache blocks fit on this rank's device (vLLM's
// determine_num_available_blocks): run the largest forward passes the
// runner allows against a one-block dummy cache, then
//     blocks = (total * gpu_memory_utilization - in_use - headroom) / block_bytes
// where in_use = total - free (cudaMemGetInfo) after the profiling passes:
// this process's weights, activations, CUDA context and cuBLAS workspaces,
// and whatever other processes hold. The runner allocates its activation
// buffers up front (Create), so the memory after the passes is the peak;
// what the passes themselves added (cuBLAS workspaces, buffers that grew)
// is reported as profile_growth_bytes.
//
// Every rank profiles on its own; the scheduler takes the minimum over ranks.
#ifndef FOLIO_WORKER_CUDA_MEMORY_PROFILE_H_
#define FOLIO_WORKER_CUDA_MEMORY_PROFILE_H_

#include <cstdint>
#include <string>

#include "kernels/cache_layout.h"
#include "worker/cuda/cuda_model.h"
#include "worker/cuda/cuda_status.h"

namespace folio::gpu {

struct KvProfileOptions {
  double gpu_memory_utilization = 0.9;  // in (0, 1]
  // The prefill pass: this many tokens (0: the runner's max_num_tokens) in
  // sequences of at most max_model_len tokens.
  int32_t max_num_batched_tokens = 0;
  // The decode pass: this many sequences (0: the runner's max_num_seqs, at
  // most its max_num_tokens), each at context max_model_len.
  int32_t max_num_seqs = 0;
  int32_t max_model_len = 0;  // 0: the runner's max_model_len, else the model's
  int32_t block_size = 16;
  kernels::CacheDtype cache_dtype = kernels::CacheDtype::kBFloat16;
  // Left free on top: -1 means max(256 MiB, 2% of the device's memory).
  int64_t headroom_bytes = -1;
};

struct KvProfile {
  int64_t total_bytes = 0;           // the device's memory
  int64_t in_use_bytes = 0;          // total - free after the profiling passes
  int64_t weights_bytes = 0;         // the runner's weights
  int64_t activation_bytes = 0;      // the runner's activation buffers (after the passes)
  int64_t other_bytes = 0;           // in_use - weights - activations: context, cuBLAS, others
  int64_t profile_growth_bytes = 0;  // in_use after the passes - in_use before them
  int64_t budget_bytes = 0;          // total * gpu_memory_utilization
  int64_t headroom_bytes = 0;
  int64_t kv_bytes = 0;              // budget - in_use - headroom (>= 0)
  int64_t block_bytes = 0;           // one block, all layers, K and V
  int64_t num_blocks = 0;            // kv_bytes / block_bytes

  // One line for the worker's log: every figure in MiB.
  std::string ToString() const;
};

// Runs the profiling passes on `runner` (they write only to a dummy cache)
// and fills *out. InvalidArgument for bad options; a failed pass fails.
CudaStatus ProfileKvBlocks(CudaModelRunner& runner, const KvProfileOptions& options,
                           KvProfile* out);

}  // namespace folio::gpu

#endif  // FOLIO_WORKER_CUDA_MEMORY_PROFILE_H_
