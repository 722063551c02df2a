#include "worker/cpu_worker.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace folio {

absl::StatusOr<std::unique_ptr<CpuWorker>> CpuWorker::Create(const Options& options) {
  absl::StatusOr<std::unique_ptr<ModelWeights>> weights =
      ModelWeights::Load(options.model_dir, options.shard);
  if (!weights.ok()) return weights.status();
  const ModelConfig& c = (*weights)->config;
  CacheEngine::Options co;
  co.num_layers = c.num_layers;
  co.num_kv_heads = (*weights)->shape.num_kv_heads;
  co.head_dim = c.head_dim;
  co.block_size = options.block_size;
  co.num_host_blocks = options.num_host_blocks;
  co.num_device_blocks = options.num_device_blocks;
  if (co.num_device_blocks <= 0) {
    const int64_t per_block =
        CacheEngine::BytesPerBlock(co.num_layers, co.num_kv_heads, co.head_dim, co.block_size);
    co.num_device_blocks = static_cast<int32_t>(options.kv_cache_bytes / per_block);
    if (co.num_device_blocks <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("kv_cache_bytes ", options.kv_cache_bytes,
                                                     " holds no KV block of ", per_block, " bytes"));
    }
  }
  absl::StatusOr<std::unique_ptr<CacheEngine>> cache = CacheEngine::Create(co);
  if (!cache.ok()) return cache.status();
  return std::unique_ptr<CpuWorker>(
      new CpuWorker(options, std::move(*weights), std::move(*cache)));
}

CpuWorker::CpuWorker(const Options& options, std::unique_ptr<ModelWeights> weights,
                     std::unique_ptr<CacheEngine> cache)
    : options_(options),
      weights_(std::move(weights)),
      cache_(std::move(cache)),
      runner_(*weights_, *cache_, options.reducer),
      sampler_(options.seed),
      mirror_(options.block_size, cache_->options().num_device_blocks) {}

absl::Status CpuWorker::BuildBatch(const StepPlan& plan) {
  batch_.Clear();
  batch_seqs_.clear();
  const int32_t bs = options_.block_size;
  int32_t max_blocks = 0;
  for (const ScheduledSequence& work : plan.scheduled) {
    absl::StatusOr<MirroredSequence*> m = mirror_.ApplyScheduled(work);
    if (!m.ok()) return m.status();
    batch_seqs_.push_back(*m);
    const int32_t end = work.start_position + static_cast<int32_t>(work.token_ids.size());
    max_blocks = std::max(max_blocks, (end + bs - 1) / bs);
  }
  batch_.max_blocks_per_seq = std::max(1, max_blocks);
  batch_.query_start.push_back(0);
  for (size_t s = 0; s < plan.scheduled.size(); ++s) {
    const ScheduledSequence& work = plan.scheduled[s];
    const MirroredSequence& m = *batch_seqs_[s];
    const int32_t count = static_cast<int32_t>(work.token_ids.size());
    for (int32_t i = 0; i < count; ++i) {
      const int32_t pos = work.start_position + i;
      batch_.token_ids.push_back(work.token_ids[i]);
      batch_.positions.push_back(pos);
      batch_.slot_mapping.push_back(int64_t{m.blocks[pos / bs]} * bs + pos % bs);
    }
    batch_.query_start.push_back(batch_.num_tokens());
    batch_.context_lens.push_back(work.start_position + count);
    const int32_t used = (work.start_position + count + bs - 1) / bs;
    for (int32_t b = 0; b < batch_.max_blocks_per_seq; ++b) {
      batch_.block_tables.push_back(b < used ? m.blocks[b] : 0);
    }
    if (work.sample_mode != SampleMode::kNone) batch_.logits_rows.push_back(batch_.num_tokens() - 1);
  }
  return absl::OkStatus();
}

absl::StatusOr<StepResult> CpuWorker::Execute(const StepPlan& plan) {
  if (absl::Status s = cache_->ExecuteBlockOps(plan); !s.ok()) return s;
  if (absl::Status s = mirror_.ApplyMetadata(plan); !s.ok()) return s;
  if (absl::Status s = BuildBatch(plan); !s.ok()) return s;
  if (absl::Status s = runner_.Forward(batch_, logits_); !s.ok()) return s;

  StepResult result;
  result.step_id = plan.step_id;
  if (options_.shard.rank != 0) return result;
  const int32_t vocab = config().vocab_size;
  size_t row = 0;
  for (size_t s = 0; s < plan.scheduled.size(); ++s) {
    const ScheduledSequence& work = plan.scheduled[s];
    if (work.sample_mode == SampleMode::kNone) continue;
    const MirroredSequence& m = *batch_seqs_[s];
    SamplingRequest req;
    req.logits = std::span<const float>(&logits_[row * vocab], vocab);
    req.params = &m.sampling;
    req.prompt_tokens = std::span<const TokenId>(m.tokens.data(), m.num_prompt_tokens);
    req.output_tokens = std::span<const TokenId>(m.tokens.data() + m.num_prompt_tokens,
                                                 m.tokens.size() - m.num_prompt_tokens);
    req.request_id = m.request_id;
    req.sequence_index = m.index;
    req.mode = work.sample_mode;
    req.num_samples = work.num_samples;
    result.samples.push_back({work.seq_id, sampler_.Sample(req)});
    ++row;
  }
  return result;
}

}  // namespace folio
