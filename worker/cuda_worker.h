#ifndef FOLIO_WORKER_CUDA_WORKER_H_
#define FOLIO_WORKER_CUDA_WORKER_H_

// One worker rank on a CUDA device (`--device cuda`): the twin of CpuWorker
// (worker/cpu_worker.h) over the std-only CUDA core of worker/cuda/.
//
// What runs where:
//   host    the plan mirror (common/plan_mirror.h) and the flattened batch
//           (worker/forward_batch.h, the same BuildForwardBatch as the CPU
//           worker), the sampling parameters and keys of each row (the CPU
//           Sampler's RowParams, so both devices draw with the same keys);
//   device  the weights (bf16 or fp32 GEMM operands; norms fp32), the paged
//           KV cache (bf16 or fp32) and its swap/copy ops, every layer of the
//           forward pass, the logits (rank 0), and sampling of the logits
//           rows (kernels/cuda/sampling.cuh).
// What crosses the PCIe bus per step: the batch's index arrays (one packed
// upload), the sampling rows/history/keys/biases (rank 0), swapped KV blocks
// to and from the pinned host pool, and back to the host only the sampled
// tokens, their log-probs and top-N lists; never a sampled row's logits (only
// prompt scoring brings its rows' logits over, 64 at a time). Tensor
// parallelism sums and gathers device memory through an NCCL Communicator
// (worker/nccl_communicator.h).
//
// Only in builds with CUDA (library folio_worker_cuda).
// tests/worker/cuda_worker_test.cc checks it against CpuWorker where a device
// exists (it passed on an H200, as did a served cluster on --device cuda:
// tests/gpu/run_cluster.sh); NCCL tensor parallelism across 2+ GPUs has not
// run yet.
//
// Thread-compatible: the caller serializes every call; each call makes the
// worker's device current on the calling thread.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model_config.h"
#include "common/plan_mirror.h"
#include "common/step_plan.h"
#include "kernels/cuda/sampling.cuh"
#include "worker/communicator.h"
#include "worker/cuda/cuda_kv_cache.h"
#include "worker/cuda/cuda_model.h"
#include "worker/cuda/device_buffer.h"
#include "worker/cuda/memory_profile.h"
#include "worker/forward_batch.h"
#include "worker/model_weights.h"
#include "worker/model_worker.h"
#include "worker/sampler.h"

namespace folio {

class CudaWorker final : public ModelWorker {
 public:
  enum class Dtype { kBFloat16, kFloat32 };

  struct Options {
    std::string model_dir;
    ShardSpec shard;
    int32_t device = 0;  // CUDA device ordinal
    int32_t block_size = 16;
    // GEMM weights and KV cache; activations, norms and logits are fp32.
    Dtype dtype = Dtype::kBFloat16;
    // Device KV cache: num_device_blocks when > 0, else kv_cache_bytes /
    // block_bytes() when > 0, else what a memory profile leaves free
    // (gpu::ProfileKvBlocks at memory_utilization of the device).
    int32_t num_device_blocks = 0;
    int64_t kv_cache_bytes = 0;
    double memory_utilization = 0.9;  // in (0, 1]
    // Host (swap) pool, pinned: num_host_blocks when > 0, else
    // swap_space_bytes / block_bytes().
    int32_t num_host_blocks = 0;
    int64_t swap_space_bytes = 0;
    // The largest step the scheduler sends (sizes the activation buffers and
    // the profiling passes). max_model_len 0: the model's context
    // (ModelConfig::MaxModelLen).
    int32_t max_model_len = 0;
    int32_t max_num_batched_tokens = 2048;
    int32_t max_num_seqs = 256;
    uint64_t seed = 0;  // for requests without a seed of their own
    // Tensor parallelism: a Communicator on DEVICE memory of `device` (an
    // NcclCommunicator) with world_size == shard.world_size and rank ==
    // shard.rank; null for one rank. Must outlive the worker.
    Communicator* communicator = nullptr;
  };

  // The number of CUDA devices this process sees. FAILED_PRECONDITION when
  // the runtime reports none or fails (no driver, no device): the message
  // carries CUDA's error.
  static absl::StatusOr<int32_t> DeviceCount();

  // Loads this rank's weights, uploads them to `device` and sizes the KV
  // cache (profiling when the options give no size; the breakdown goes to
  // stderr). The cache is not allocated yet.
  static absl::StatusOr<std::unique_ptr<CudaWorker>> Load(const Options& options);
  // Load() then AllocateCache(DeviceBlocksThatFit(), HostBlocksThatFit()).
  static absl::StatusOr<std::unique_ptr<CudaWorker>> Create(const Options& options);

  ~CudaWorker() override;
  CudaWorker(const CudaWorker&) = delete;
  CudaWorker& operator=(const CudaWorker&) = delete;

  const ModelConfig& config() const override { return config_; }
  const ShardShape& shard_shape() const override { return shape_; }
  int64_t block_bytes() const override;
  int32_t DeviceBlocksThatFit() const override { return device_blocks_that_fit_; }
  int32_t HostBlocksThatFit() const override;
  absl::Status AllocateCache(int32_t num_device_blocks, int32_t num_host_blocks) override;
  int32_t num_device_blocks() const override { return cache_ ? cache_->num_device_blocks() : 0; }
  int32_t num_host_blocks() const override { return cache_ ? cache_->num_host_blocks() : 0; }
  absl::StatusOr<StepResult> Execute(const StepPlan& plan) override;
  std::string device_name() const override { return device_name_; }
  kernels::CacheDtype kv_cache_dtype() const override { return cache_dtype_; }

  // The memory profile of Load (all zero when the options gave the size).
  const gpu::KvProfile& kv_profile() const { return profile_; }

 private:
  class Collectives;  // gpu::DeviceCollectives over options_.communicator

  explicit CudaWorker(const Options& options);
  absl::Status Init(const ModelWeights& weights);
  // Rank 0: samples the runner's logits rows on the device into *result.
  absl::Status Sample(const StepPlan& plan, StepResult* result);
  // ScoreRowsFn on the device (rank 0, after RowLogits): a scoring row per
  // target through the sampling kernels.
  absl::Status ScoreRows(std::span<const TokenId> targets, int32_t num_top,
                         std::vector<SampledToken>* scored);
  // Host views of RunSampling's results (pinned, valid until the next run).
  struct SamplingResults {
    const int32_t* tokens = nullptr;       // [num_samples]
    const float* logprobs = nullptr;       // [num_samples]
    const float* token_logprobs = nullptr; // [rows], rows with a score_token
    const int32_t* top_ids = nullptr;      // [rows][max_top]
    const float* top_logprobs = nullptr;   // [rows][max_top]
    // Row `row`'s first n top entries (fewer when the vocabulary is).
    std::vector<TokenLogprob> TopList(size_t row, int32_t max_top, int32_t n) const;
  };
  // Runs sampling_ over the runner's logits(): uploads its inputs, samples,
  // copies the outputs to the host and waits for them.
  absl::StatusOr<SamplingResults> RunSampling();

  // Const after Load.
  const Options options_;
  ModelConfig config_;
  ShardShape shape_;
  std::string device_name_;
  kernels::CacheDtype cache_dtype_ = kernels::CacheDtype::kBFloat16;
  int32_t device_blocks_that_fit_ = 0;
  gpu::KvProfile profile_;
  std::unique_ptr<Collectives> collectives_;  // null for one rank
  std::unique_ptr<gpu::CudaModelRunner> runner_;

  // Set by AllocateCache.
  std::unique_ptr<gpu::CudaKvCache> cache_;
  std::unique_ptr<PlanMirror> mirror_;

  // Per-step scratch, reused.
  Sampler sampler_;  // only its RowParams (parameters and keys)
  ForwardBatch batch_;
  std::vector<const MirroredSequence*> batch_seqs_;
  std::vector<kernels::BlockPair> swap_out_, swap_in_, copies_;
  Sampler::RowScratch row_scratch_;
  kernels::gpu::GpuSamplingBatch sampling_;
  // rows | history | keys | bias ids | bias values, uploaded at once
  gpu::PinnedBuffer<uint8_t> sampling_staging_;
  gpu::DeviceBuffer<uint8_t> sampling_inputs_;    // the same bytes on the device
  gpu::DeviceBuffer<uint8_t> sampling_workspace_;
  gpu::DeviceBuffer<uint8_t> sampling_outputs_;   // tokens | logprobs | token logprobs | top ids | top logprobs
  gpu::PinnedBuffer<uint8_t> sampling_results_;   // the same on the host
};

}  // namespace folio

#endif  // FOLIO_WORKER_CUDA_WORKER_H_
