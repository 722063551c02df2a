#include "worker/cpu_worker.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/threads.h"
#include "worker/prompt_logprobs.h"

namespace folio {
namespace {

// One compute pool per worker thread (see Options::num_threads): the kernel
// threads, which also run the GEMMs. Applied once per calling thread and
// setting.
void ApplyThreadSettings(int32_t num_threads) {
  thread_local int32_t applied = -1;
  if (applied == num_threads) return;
  kernels::cpu::SetKernelThreads(num_threads);
  applied = num_threads;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CpuWorker>> CpuWorker::Create(const Options& options) {
  absl::StatusOr<std::unique_ptr<CpuWorker>> worker = Load(options);
  if (!worker.ok()) return worker.status();
  const int32_t device_blocks = (*worker)->DeviceBlocksThatFit();
  if (device_blocks <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("kv_cache_bytes ", options.kv_cache_bytes,
                                                   " holds no KV block of ",
                                                   (*worker)->block_bytes(), " bytes"));
  }
  if (absl::Status s = (*worker)->AllocateCache(device_blocks, (*worker)->HostBlocksThatFit());
      !s.ok()) {
    return s;
  }
  return worker;
}

absl::StatusOr<std::unique_ptr<CpuWorker>> CpuWorker::Load(const Options& options) {
  if (options.communicator != nullptr &&
      (options.communicator->world_size() != options.shard.world_size ||
       options.communicator->rank() != options.shard.rank)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "communicator is rank ", options.communicator->rank(), " of ",
        options.communicator->world_size(), " but the shard is rank ", options.shard.rank,
        " of ", options.shard.world_size));
  }
  if (options.communicator == nullptr && options.shard.world_size > 1) {
    return absl::InvalidArgumentError("tensor parallelism needs a communicator");
  }
  if (absl::Status s = CheckCpuQuantization(options.quantization); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<ModelWeights>> weights =
      ModelWeights::Load(options.model_dir, options.shard);
  if (!weights.ok()) return weights.status();
  const kernels::cpu::WeightType type = CpuWeightType(
      options.dtype, (*weights)->config.torch_dtype, options.quantization == "int8");
  PackedWeights packed = PackedWeights::PackAndRelease(**weights, type);
  return std::unique_ptr<CpuWorker>(new CpuWorker(options, std::move(*weights), std::move(packed)));
}

CpuWorker::CpuWorker(const Options& options, std::unique_ptr<ModelWeights> weights,
                     PackedWeights packed)
    : options_(options),
      weights_(std::move(weights)),
      packed_(std::move(packed)),
      sampler_(options.seed) {}

int64_t CpuWorker::block_bytes() const {
  return CacheEngine::BytesPerBlock(config().num_layers, weights_->shape.num_kv_heads,
                                    config().head_dim, options_.block_size,
                                    options_.kv_cache_dtype);
}

int32_t CpuWorker::DeviceBlocksThatFit() const {
  if (options_.num_device_blocks > 0) return options_.num_device_blocks;
  return static_cast<int32_t>(
      std::min<int64_t>(options_.kv_cache_bytes / block_bytes(), int64_t{1} << 30));
}

int32_t CpuWorker::HostBlocksThatFit() const {
  if (options_.num_host_blocks > 0) return options_.num_host_blocks;
  return static_cast<int32_t>(
      std::min<int64_t>(std::max<int64_t>(options_.swap_space_bytes, 0) / block_bytes(),
                        int64_t{1} << 30));
}

absl::Status CpuWorker::AllocateCache(int32_t num_device_blocks, int32_t num_host_blocks) {
  if (cache_ != nullptr) return absl::FailedPreconditionError("the KV cache is allocated already");
  if (num_device_blocks <= 0 || num_host_blocks < 0) {
    return absl::InvalidArgumentError(absl::StrCat("need > 0 device blocks and >= 0 host blocks, got ",
                                                   num_device_blocks, " and ", num_host_blocks));
  }
  const ModelConfig& c = config();
  CacheEngine::Options co;
  co.num_layers = c.num_layers;
  co.num_kv_heads = weights_->shape.num_kv_heads;
  co.head_dim = c.head_dim;
  co.block_size = options_.block_size;
  co.num_device_blocks = num_device_blocks;
  co.num_host_blocks = num_host_blocks;
  co.dtype = options_.kv_cache_dtype;
  absl::StatusOr<std::unique_ptr<CacheEngine>> cache = CacheEngine::Create(co);
  if (!cache.ok()) return cache.status();
  cache_ = std::move(*cache);
  runner_ = std::make_unique<ModelRunner>(*weights_, packed_, *cache_, options_.communicator);
  mirror_ = std::make_unique<PlanMirror>(options_.block_size, num_device_blocks);
  return absl::OkStatus();
}

absl::StatusOr<StepResult> CpuWorker::Execute(const StepPlan& plan) {
  if (cache_ == nullptr) return absl::FailedPreconditionError("Execute before AllocateCache");
  ApplyThreadSettings(options_.num_threads);
  if (profile_ == nullptr) return ExecuteTimed(plan, nullptr);
  // The kind of step is known once the batch is built: time into a scratch
  // set of sums, then add them to the right kind.
  StepTimes times;
  const int64_t start = ScopedStepPart::Now();
  absl::StatusOr<StepResult> result = ExecuteTimed(plan, &times);
  times.total_nanos = ScopedStepPart::Now() - start;
  times.tokens = batch_.num_tokens();
  times.steps = 1;
  (batch_.num_tokens() == batch_.num_seqs() ? profile_->decode : profile_->other) += times;
  return result;
}

absl::StatusOr<StepResult> CpuWorker::ExecuteTimed(const StepPlan& plan, StepTimes* times) {
  runner_->set_step_times(times);
  {
    ScopedStepPart part(times, StepPart::kPlan);
    if (absl::Status s = cache_->ExecuteBlockOps(plan); !s.ok()) return s;
    if (absl::Status s = mirror_->ApplyMetadata(plan); !s.ok()) return s;
    if (absl::Status s =
            BuildForwardBatch(plan, *mirror_, options_.block_size, &batch_, &batch_seqs_);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = runner_->Forward(batch_, logits_); !s.ok()) return s;

  StepResult result;
  result.step_id = plan.step_id;
  const bool rank0 = options_.shard.rank == 0;
  // Prompt scoring reuses the forward pass; its LM-head rows are a collective.
  const RowLogitsFn logits_of = [this](std::span<const int32_t> rows) {
    return runner_->Logits(rows, prompt_logits_);
  };
  const ScoreRowsFn score_rows = [this](std::span<const TokenId> targets, int32_t num_top,
                                        std::vector<SampledToken>* scored) {
    return ScoreRowsOnHost(prompt_logits_, config().vocab_size, targets, num_top,
                           &prompt_scratch_, scored);
  };
  if (absl::Status s = ScorePrompts(plan, batch_, batch_seqs_, config().vocab_size,
                                    kMaxScoredRowsPerCall, rank0, logits_of, score_rows,
                                    &result.prompt_logprobs);
      !s.ok()) {
    return s;
  }
  if (!rank0) return result;
  ScopedStepPart sampling(times, StepPart::kSampling);
  const int32_t vocab = config().vocab_size;
  sample_rows_.clear();
  for (size_t s = 0; s < plan.scheduled.size(); ++s) {
    const ScheduledSequence& work = plan.scheduled[s];
    if (work.sample_mode == SampleMode::kNone) continue;
    const MirroredSequence& m = *batch_seqs_[s];
    SamplingRequest& req = sample_rows_.emplace_back();
    req.logits = std::span<const float>(&logits_[(sample_rows_.size() - 1) * vocab], vocab);
    req.params = &m.sampling;
    req.prompt_tokens = std::span<const TokenId>(m.tokens.data(), m.num_prompt_tokens);
    req.output_tokens = std::span<const TokenId>(m.tokens.data() + m.num_prompt_tokens,
                                                 m.tokens.size() - m.num_prompt_tokens);
    req.request_id = m.request_id;
    req.sequence_index = m.index;
    req.mode = work.sample_mode;
    req.num_samples = work.num_samples;
  }
  sampler_.SampleRows(sample_rows_, &samples_);
  size_t row = 0;
  for (const ScheduledSequence& work : plan.scheduled) {
    if (work.sample_mode == SampleMode::kNone) continue;
    result.samples.push_back({work.seq_id, std::move(samples_[row++])});
  }
  return result;
}

}  // namespace folio
