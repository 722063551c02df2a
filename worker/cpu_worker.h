#ifndef FOLIO_WORKER_CPU_WORKER_H_
#define FOLIO_WORKER_CPU_WORKER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/plan_mirror.h"
#include "common/step_plan.h"
#include "worker/cache_engine.h"
#include "worker/communicator.h"
#include "worker/forward_batch.h"
#include "worker/model_runner.h"
#include "worker/model_weights.h"
#include "worker/model_worker.h"
#include "worker/packed_weights.h"
#include "worker/prompt_logprobs.h"
#include "worker/sampler.h"
#include "worker/step_profile.h"

namespace folio {

// One worker rank on the CPU: executes StepPlans against its model shard and
// KV cache and (rank 0) samples. It decides nothing: every block id, token
// and position comes from the plan.
//
// Thread-compatible: the caller serializes Execute().
class CpuWorker final : public ModelWorker {
 public:
  struct Options {
    std::string model_dir;
    ShardSpec shard;
    int32_t block_size = 16;
    // KV cache budget of the device pool; ignored when num_device_blocks > 0.
    int64_t kv_cache_bytes = int64_t{256} << 20;
    int32_t num_device_blocks = 0;
    // Host (swap) pool budget; ignored when num_host_blocks > 0.
    int64_t swap_space_bytes = 0;
    int32_t num_host_blocks = 0;
    uint64_t seed = 0;  // for requests without a seed of their own
    // Compute threads of this worker: the kernels' OpenMP threads, which
    // also run the GEMMs. 0 = OMP_NUM_THREADS when set, else
    // the hardware concurrency (kernels::cpu::DefaultKernelThreads).
    // Applied on the thread that calls Execute. OPENBLAS_CORETYPE and the
    // OMP_* environment are left as they are (OMP_WAIT_POLICY=PASSIVE makes
    // idle threads sleep instead of spinning, kinder on shared machines).
    int32_t num_threads = 0;
    // How the GEMM weights are stored (worker/packed_weights.h,
    // CpuWeightType): dtype nullopt = "auto", the checkpoint's torch_dtype
    // (bf16 stays bf16; fp16 and fp32 compute from fp32); quantization ""
    // (none) or "int8" (weight-only, symmetric, per output channel, computed
    // at load). Activations are fp32 either way.
    std::optional<DType> dtype;
    std::string quantization;
    // What the KV cache stores (--kv-cache-dtype, common/kv_cache_dtype.h):
    // fp32, or one-byte int8 / fp8 e4m3 codes with per-block, per-KV-head
    // scales, so the same kv_cache_bytes holds about 4x the tokens.
    kernels::CacheDtype kv_cache_dtype = kernels::CacheDtype::kFloat32;
    // Tensor parallelism (world_size == shard.world_size, rank ==
    // shard.rank); null for one rank. Must outlive the worker.
    Communicator* communicator = nullptr;
  };

  // Load() then AllocateCache(DeviceBlocksThatFit(), HostBlocksThatFit()).
  static absl::StatusOr<std::unique_ptr<CpuWorker>> Create(const Options& options);

  // The two halves of Create, as the Worker RPCs split them (Initialize,
  // AllocateCache): Load reads this rank's shard and sizes one KV block; the
  // scheduler then sends every rank the same pool sizes.
  static absl::StatusOr<std::unique_ptr<CpuWorker>> Load(const Options& options);
  // FAILED_PRECONDITION if the cache is allocated already.
  absl::Status AllocateCache(int32_t num_device_blocks, int32_t num_host_blocks) override;

  CpuWorker(const CpuWorker&) = delete;
  CpuWorker& operator=(const CpuWorker&) = delete;

  const ModelConfig& config() const override { return weights_->config; }
  const ShardShape& shard_shape() const override { return weights_->shape; }
  // Bytes of one KV block on this rank (all layers, K and V) in
  // options.kv_cache_dtype, scales included.
  int64_t block_bytes() const override;
  // From options: num_device_blocks, or kv_cache_bytes / block_bytes().
  int32_t DeviceBlocksThatFit() const override;
  // From options: num_host_blocks, or swap_space_bytes / block_bytes().
  int32_t HostBlocksThatFit() const override;
  bool cache_allocated() const { return cache_ != nullptr; }
  // 0 before AllocateCache.
  int32_t num_device_blocks() const override {
    return cache_ ? cache_->options().num_device_blocks : 0;
  }
  int32_t num_host_blocks() const override {
    return cache_ ? cache_->options().num_host_blocks : 0;
  }
  std::string device_name() const override { return "cpu"; }
  kernels::CacheDtype kv_cache_dtype() const override { return options_.kv_cache_dtype; }

  // Cache ops, then the forward pass of every scheduled token, then samples
  // for the sequences the plan asks to sample (rank 0 only).
  // REQUIRES: AllocateCache done (FAILED_PRECONDITION otherwise).
  absl::StatusOr<StepResult> Execute(const StepPlan& plan) override;

  // Time every step from now on, by part (worker/step_profile.h); `profile`
  // must outlive the worker or a later call with null, which stops it.
  void set_step_profile(StepProfile* profile) { profile_ = profile; }

 private:
  absl::StatusOr<StepResult> ExecuteTimed(const StepPlan& plan, StepTimes* times);

  CpuWorker(const Options& options, std::unique_ptr<ModelWeights> weights, PackedWeights packed);

  const Options options_;
  std::unique_ptr<ModelWeights> weights_;  // config, norms, biases (the GEMM weights: packed_)
  const PackedWeights packed_;
  // Set by AllocateCache.
  std::unique_ptr<CacheEngine> cache_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<PlanMirror> mirror_;
  BatchSampler sampler_;
  std::vector<SamplingRequest> sample_rows_;          // this step's rows to sample
  std::vector<std::vector<SampledToken>> samples_;    // and their samples
  StepProfile* profile_ = nullptr;
  ForwardBatch batch_;
  std::vector<const MirroredSequence*> batch_seqs_;  // per batch sequence
  std::vector<float> logits_;
  // Prompt scoring's logits rows and per-row scratch, reused between steps.
  std::vector<float> prompt_logits_;
  PromptRowScratch prompt_scratch_;
};

}  // namespace folio

#endif  // FOLIO_WORKER_CPU_WORKER_H_
