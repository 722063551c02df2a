#ifndef FOLIO_WORKER_CPU_WORKER_H_
#define FOLIO_WORKER_CPU_WORKER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/plan_mirror.h"
#include "common/step_plan.h"
#include "worker/cache_engine.h"
#include "worker/model_runner.h"
#include "worker/model_weights.h"
#include "worker/sampler.h"

namespace folio {

// One worker rank on the CPU: executes StepPlans against its model shard and
// KV cache and (rank 0) samples. It decides nothing: every block id, token
// and position comes from the plan.
//
// Thread-compatible: the caller serializes Execute().
class CpuWorker {
 public:
  struct Options {
    std::string model_dir;
    ShardSpec shard;
    int32_t block_size = 16;
    // KV cache budget of the device pool; ignored when num_device_blocks > 0.
    int64_t kv_cache_bytes = int64_t{256} << 20;
    int32_t num_device_blocks = 0;
    int32_t num_host_blocks = 0;
    uint64_t seed = 0;  // for requests without a seed of their own
    AllReducer* reducer = nullptr;  // tensor parallelism; null for one rank
  };

  static absl::StatusOr<std::unique_ptr<CpuWorker>> Create(const Options& options);
  CpuWorker(const CpuWorker&) = delete;
  CpuWorker& operator=(const CpuWorker&) = delete;

  const ModelConfig& config() const { return weights_->config; }
  int32_t num_device_blocks() const { return cache_->options().num_device_blocks; }
  int32_t num_host_blocks() const { return cache_->options().num_host_blocks; }

  // Cache ops, then the forward pass of every scheduled token, then samples
  // for the sequences the plan asks to sample (rank 0 only).
  absl::StatusOr<StepResult> Execute(const StepPlan& plan);

 private:
  CpuWorker(const Options& options, std::unique_ptr<ModelWeights> weights,
            std::unique_ptr<CacheEngine> cache);
  absl::Status BuildBatch(const StepPlan& plan);

  const Options options_;
  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<CacheEngine> cache_;
  ModelRunner runner_;
  Sampler sampler_;
  PlanMirror mirror_;
  ForwardBatch batch_;
  std::vector<const MirroredSequence*> batch_seqs_;  // per batch sequence
  std::vector<float> logits_;
};

}  // namespace folio

#endif  // FOLIO_WORKER_CPU_WORKER_H_
