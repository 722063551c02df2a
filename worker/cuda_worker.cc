#include "worker/cuda_worker.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/cuda/host_model.h"
#include "worker/prompt_logprobs.h"
#include "worker/rope_config.h"

namespace folio {
namespace {

namespace kg = kernels::gpu;

absl::Status ToAbsl(const gpu::CudaStatus& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  const std::string message = absl::StrCat(what, ": ", s.message());
  if (s.code() == gpu::CudaStatus::Code::kInvalidArgument) {
    return absl::InvalidArgumentError(message);
  }
  return absl::InternalError(message);
}

absl::Status CudaError(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return ToAbsl(gpu::FromCuda(e, what.c_str()), "CudaWorker");
}

gpu::CudaStatus ToCuda(const absl::Status& s) {
  if (s.ok()) return gpu::CudaStatus::Ok();
  if (s.code() == absl::StatusCode::kInvalidArgument) {
    return gpu::CudaStatus::InvalidArgument(std::string(s.message()));
  }
  return gpu::CudaStatus::Internal(s.ToString());
}

void ToPairs(const std::vector<BlockCopy>& ops, std::vector<kernels::BlockPair>* pairs) {
  pairs->clear();
  for (const BlockCopy& op : ops) pairs->push_back({op.src, op.dst});
}

// This rank's weights as the CUDA core's std-only view (pointers into
// `w`, which must outlive the view).
gpu::HostModel ViewOf(const ModelWeights& w) {
  const ModelConfig& c = w.config;
  gpu::HostModel h;
  h.hidden = c.hidden_size;
  h.intermediate = w.shape.intermediate;
  h.num_heads = w.shape.num_heads;
  h.num_kv_heads = w.shape.num_kv_heads;
  h.head_dim = c.head_dim;
  h.vocab_size = c.vocab_size;
  h.vocab_begin = w.shape.vocab_begin;
  h.vocab_count = w.shape.vocab_count;
  h.vocab_padded = w.shape.vocab_padded;
  h.rms_eps = c.rms_norm_eps;
  h.rope_theta = c.rope_theta;
  h.rope_scaling = RopeScalingOf(c);
  h.max_position = c.MaxModelLen();
  h.qkv_bias = c.qkv_bias;
  h.tied_embeddings = w.lm_head.empty();
  h.embed = w.embed;
  h.final_norm = w.final_norm;
  h.lm_head = w.lm_head;
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& L = w.layers[i];
    h.layers.push_back(gpu::HostLayer{L.input_norm, L.qkv, L.qkv_bias, L.o_proj,
                                      L.post_attention_norm, L.gate_up, L.down_proj,
                                      c.AttentionWindow(static_cast<int32_t>(i))});
  }
  return h;
}

size_t Align(size_t v) { return (v + 255) / 256 * 256; }

double MiB(int64_t bytes) { return static_cast<double>(bytes) / double(1 << 20); }

}  // namespace

// The runner's collectives over the service's Communicator (an
// NcclCommunicator: device pointers, synchronous). The input must be
// written before the collective starts, so the compute stream is drained
// first (as gpu::NcclCollectives does over a bare NcclGroup); the
// communicator's busy_seconds() then times the collectives alone.
class CudaWorker::Collectives final : public gpu::DeviceCollectives {
 public:
  explicit Collectives(Communicator& comm) : comm_(comm) {}

  int32_t rank() const override { return comm_.rank(); }
  int32_t world_size() const override { return comm_.world_size(); }

  gpu::CudaStatus AllReduceSum(float* data, int64_t count, cudaStream_t stream) override {
    FOLIO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream),
                               "AllReduceSum: cudaStreamSynchronize");
    return ToCuda(comm_.AllReduceSum(data, count));
  }
  gpu::CudaStatus GatherToRank0(const float* send, int64_t count, float* recv,
                                cudaStream_t stream) override {
    FOLIO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream),
                               "GatherToRank0: cudaStreamSynchronize");
    return ToCuda(comm_.GatherToRank0(send, count, recv));
  }

 private:
  Communicator& comm_;
};

absl::StatusOr<int32_t> CudaWorker::DeviceCount() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat(
        "no usable CUDA device: cudaGetDeviceCount: ", cudaGetErrorName(e), " (",
        cudaGetErrorString(e), ")"));
  }
  if (count <= 0) return absl::FailedPreconditionError("no CUDA device: cudaGetDeviceCount is 0");
  return static_cast<int32_t>(count);
}

absl::StatusOr<std::unique_ptr<CudaWorker>> CudaWorker::Create(const Options& options) {
  absl::StatusOr<std::unique_ptr<CudaWorker>> worker = Load(options);
  if (!worker.ok()) return worker.status();
  const int32_t device_blocks = (*worker)->DeviceBlocksThatFit();
  if (device_blocks <= 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "no KV block of ", (*worker)->block_bytes(), " bytes fits on cuda:", options.device));
  }
  if (absl::Status s = (*worker)->AllocateCache(device_blocks, (*worker)->HostBlocksThatFit());
      !s.ok()) {
    return s;
  }
  return worker;
}

absl::StatusOr<std::unique_ptr<CudaWorker>> CudaWorker::Load(const Options& o) {
  if (o.communicator != nullptr && (o.communicator->world_size() != o.shard.world_size ||
                                    o.communicator->rank() != o.shard.rank)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "communicator is rank ", o.communicator->rank(), " of ", o.communicator->world_size(),
        " but the shard is rank ", o.shard.rank, " of ", o.shard.world_size));
  }
  if (o.communicator == nullptr && o.shard.world_size > 1) {
    return absl::InvalidArgumentError("tensor parallelism needs a communicator");
  }
  if (!(o.memory_utilization > 0.0 && o.memory_utilization <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory_utilization must be in (0, 1], got ", o.memory_utilization));
  }
  if (o.block_size <= 0 || o.max_num_batched_tokens <= 0 || o.max_num_seqs <= 0 ||
      o.max_model_len < 0 || o.kv_cache_bytes < 0 || o.swap_space_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CudaWorker: block_size ", o.block_size, ", max_num_batched_tokens ",
        o.max_num_batched_tokens, ", max_num_seqs ", o.max_num_seqs,
        " must be positive and max_model_len, kv_cache_bytes, swap_space_bytes not negative"));
  }
  absl::StatusOr<int32_t> count = DeviceCount();
  if (!count.ok()) return count.status();
  if (o.device < 0 || o.device >= *count) {
    return absl::InvalidArgumentError(absl::StrCat("device cuda:", o.device, ": this machine has ",
                                                   *count, " CUDA device(s)"));
  }
  absl::StatusOr<std::unique_ptr<ModelWeights>> weights = ModelWeights::Load(o.model_dir, o.shard);
  if (!weights.ok()) return weights.status();
  std::unique_ptr<CudaWorker> worker(new CudaWorker(o));
  if (absl::Status s = worker->Init(**weights); !s.ok()) return s;
  return worker;  // the host copy of the weights is freed here
}

CudaWorker::CudaWorker(const Options& options) : options_(options), sampler_(options.seed) {}

CudaWorker::~CudaWorker() {
  // Nothing queued may still use the cache or the sampling buffers.
  if (runner_ != nullptr) {
    cudaSetDevice(options_.device);
    cudaStreamSynchronize(runner_->stream());
  }
}

absl::Status CudaWorker::Init(const ModelWeights& weights) {
  const Options& o = options_;
  config_ = weights.config;
  shape_ = weights.shape;
  cache_dtype_ = o.dtype == Dtype::kFloat32 ? kernels::CacheDtype::kFloat32
                                            : kernels::CacheDtype::kBFloat16;
  if (absl::Status s = CudaError(cudaSetDevice(o.device), "cudaSetDevice"); !s.ok()) return s;
  cudaDeviceProp prop{};
  if (absl::Status s = CudaError(cudaGetDeviceProperties(&prop, o.device),
                                 "cudaGetDeviceProperties");
      !s.ok()) {
    return s;
  }
  device_name_ = prop.name;

  if (o.communicator != nullptr) collectives_ = std::make_unique<Collectives>(*o.communicator);
  gpu::CudaModelRunner::Options ro;
  ro.compute_dtype =
      o.dtype == Dtype::kFloat32 ? gpu::ComputeDtype::kFloat32 : gpu::ComputeDtype::kBFloat16;
  ro.max_num_tokens = o.max_num_batched_tokens;
  ro.max_num_seqs = o.max_num_seqs;
  // Prompt scoring's LM-head calls take up to kMaxScoredRowsPerCall rows
  // even when few sequences sample.
  ro.max_logits_rows = std::max(o.max_num_seqs, kMaxScoredRowsPerCall);
  ro.max_model_len = o.max_model_len;
  ro.device = o.device;
  ro.collectives = collectives_.get();
  gpu::HostModel view = ViewOf(weights);
  // The rotary table covers what the scheduler serves (a 32x-stretched
  // context would otherwise cost a table of millions of positions).
  if (o.max_model_len > 0) view.max_position = std::min(view.max_position, o.max_model_len);
  if (absl::Status s = ToAbsl(gpu::CudaModelRunner::Create(view, ro, &runner_),
                              "CudaModelRunner::Create");
      !s.ok()) {
    return s;
  }

  // Rank 0 samples up to max_num_seqs rows at once: its sort workspace (the
  // largest sampling buffer, ~16 bytes per logit) is allocated now so that
  // the memory profile counts it.
  if (o.shard.rank == 0) {
    // Prompt scoring runs up to kMaxScoredRowsPerCall rows through it too.
    const size_t ws = kg::SamplingWorkspaceBytes(
        std::min(std::max(o.max_num_seqs, kMaxScoredRowsPerCall), 65535), config_.vocab_size);
    if (ws == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sampling ", o.max_num_seqs, " rows of ", config_.vocab_size,
          " logits is beyond the GPU sampler's limits (rows * vocab <= 2^31 - 1)"));
    }
    if (absl::Status s = ToAbsl(sampling_workspace_.Reserve(ws, "sampling workspace"),
                                "CudaWorker");
        !s.ok()) {
      return s;
    }
  }

  const char* how = "";
  int64_t blocks = 0;
  if (o.num_device_blocks > 0) {
    blocks = o.num_device_blocks;
    how = "as configured";
  } else if (o.kv_cache_bytes > 0) {
    blocks = o.kv_cache_bytes / block_bytes();
    how = "from kv_cache_bytes";
  } else {
    gpu::KvProfileOptions po;
    po.gpu_memory_utilization = o.memory_utilization;
    po.max_num_batched_tokens = o.max_num_batched_tokens;
    po.max_num_seqs = o.max_num_seqs;
    po.max_model_len = o.max_model_len;
    po.block_size = o.block_size;
    po.cache_dtype = cache_dtype_;
    if (absl::Status s = ToAbsl(gpu::ProfileKvBlocks(*runner_, po, &profile_), "ProfileKvBlocks");
        !s.ok()) {
      return s;
    }
    blocks = profile_.num_blocks;
    how = "profiled";
    std::fprintf(stderr, "folio-worker rank %d (cuda:%d, %s): memory profile at utilization %.2f: %s\n",
                 o.shard.rank, o.device, device_name_.c_str(), o.memory_utilization,
                 profile_.ToString().c_str());
  }
  device_blocks_that_fit_ = static_cast<int32_t>(std::min<int64_t>(blocks, int64_t{1} << 30));
  std::fprintf(stderr,
               "folio-worker rank %d (cuda:%d, %s): %s weights/%s cache; weights %.0f MiB, "
               "activations %.0f MiB, %d KV blocks of %.2f MiB (%s)\n",
               o.shard.rank, o.device, device_name_.c_str(),
               o.dtype == Dtype::kFloat32 ? "float32" : "bfloat16",
               o.dtype == Dtype::kFloat32 ? "float32" : "bfloat16", MiB(runner_->weight_bytes()),
               MiB(runner_->activation_bytes()), device_blocks_that_fit_, MiB(block_bytes()), how);
  return absl::OkStatus();
}

int64_t CudaWorker::block_bytes() const {
  return gpu::CudaKvCache::BytesPerBlock(config_.num_layers, shape_.num_kv_heads,
                                         config_.head_dim, options_.block_size, cache_dtype_);
}

int32_t CudaWorker::HostBlocksThatFit() const {
  if (options_.num_host_blocks > 0) return options_.num_host_blocks;
  return static_cast<int32_t>(std::min<int64_t>(
      std::max<int64_t>(options_.swap_space_bytes, 0) / block_bytes(), int64_t{1} << 30));
}

absl::Status CudaWorker::AllocateCache(int32_t num_device_blocks, int32_t num_host_blocks) {
  if (cache_ != nullptr) return absl::FailedPreconditionError("the KV cache is allocated already");
  if (num_device_blocks <= 0 || num_host_blocks < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "need > 0 device blocks and >= 0 host blocks, got ", num_device_blocks, " and ",
        num_host_blocks));
  }
  if (absl::Status s = CudaError(cudaSetDevice(options_.device), "cudaSetDevice"); !s.ok()) {
    return s;
  }
  gpu::CudaKvCache::Options co;
  co.num_layers = config_.num_layers;
  co.num_kv_heads = shape_.num_kv_heads;
  co.head_dim = config_.head_dim;
  co.block_size = options_.block_size;
  co.num_device_blocks = num_device_blocks;
  co.num_host_blocks = num_host_blocks;
  co.dtype = cache_dtype_;
  if (absl::Status s = ToAbsl(gpu::CudaKvCache::Create(co, &cache_), "CudaKvCache::Create");
      !s.ok()) {
    cache_.reset();
    return s;
  }
  mirror_ = std::make_unique<PlanMirror>(options_.block_size, num_device_blocks);
  return absl::OkStatus();
}

absl::StatusOr<StepResult> CudaWorker::Execute(const StepPlan& plan) {
  if (cache_ == nullptr) return absl::FailedPreconditionError("Execute before AllocateCache");
  if (absl::Status s = CudaError(cudaSetDevice(options_.device), "cudaSetDevice"); !s.ok()) {
    return s;
  }
  const cudaStream_t stream = runner_->stream();
  ToPairs(plan.swap_out, &swap_out_);
  ToPairs(plan.swap_in, &swap_in_);
  ToPairs(plan.copies, &copies_);
  if (!swap_out_.empty() || !swap_in_.empty() || !copies_.empty()) {
    if (absl::Status s = ToAbsl(cache_->ExecuteBlockOps(swap_out_, swap_in_, copies_, stream),
                                "cache ops");
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = mirror_->ApplyMetadata(plan); !s.ok()) return s;
  if (absl::Status s =
          BuildForwardBatch(plan, *mirror_, options_.block_size, &batch_, &batch_seqs_);
      !s.ok()) {
    return s;
  }
  if (batch_.num_tokens() > 0) {
    gpu::CudaForwardBatch b;
    b.token_ids = batch_.token_ids;
    b.positions = batch_.positions;
    b.slot_mapping = batch_.slot_mapping;
    b.query_start = batch_.query_start;
    b.context_lens = batch_.context_lens;
    b.block_tables = batch_.block_tables;
    b.max_blocks_per_seq = batch_.max_blocks_per_seq;
    b.logits_rows = batch_.logits_rows;
    if (absl::Status s = ToAbsl(runner_->Forward(b, *cache_), "forward"); !s.ok()) return s;
  }

  StepResult result;
  result.step_id = plan.step_id;
  // A failed Sample is returned after the prompt scoring below: its
  // LM-head calls are collectives the other ranks make regardless.
  absl::Status sampled;
  if (options_.shard.rank == 0 && !batch_.logits_rows.empty()) sampled = Sample(plan, &result);
  // Prompt scoring after sampling (RowLogits replaces the sampled logits),
  // on the device like sampling: only log-probs and top lists come back.
  const RowLogitsFn logits_of = [this](std::span<const int32_t> rows) {
    return ToAbsl(runner_->RowLogits(rows), "prompt logits");
  };
  const ScoreRowsFn score_rows = [this](std::span<const TokenId> targets, int32_t num_top,
                                        std::vector<SampledToken>* scored) {
    return ScoreRows(targets, num_top, scored);
  };
  absl::Status scored = ScorePrompts(plan, batch_, batch_seqs_, config_.vocab_size,
                                     kMaxScoredRowsPerCall,
                                     options_.shard.rank == 0 && sampled.ok(), logits_of,
                                     score_rows, &result.prompt_logprobs);
  if (!sampled.ok()) return sampled;
  if (!scored.ok()) return scored;
  // The step's device work (cache ops, forward) ends here, so its errors
  // belong to this step and its time to this step's forward_seconds.
  if (absl::Status s = CudaError(cudaStreamSynchronize(stream), "step"); !s.ok()) return s;
  return result;
}

absl::Status CudaWorker::Sample(const StepPlan& plan, StepResult* result) {
  sampling_.Clear();
  std::vector<SequenceId> sampled_ids;
  for (size_t s = 0; s < plan.scheduled.size(); ++s) {
    const ScheduledSequence& work = plan.scheduled[s];
    if (work.sample_mode == SampleMode::kNone) continue;
    const MirroredSequence& m = *batch_seqs_[s];
    // The CPU sampler's request minus the logits: RowParams reads the rest.
    SamplingRequest req;
    req.params = &m.sampling;
    req.prompt_tokens = std::span<const TokenId>(m.tokens.data(), m.num_prompt_tokens);
    req.output_tokens = std::span<const TokenId>(m.tokens.data() + m.num_prompt_tokens,
                                                 m.tokens.size() - m.num_prompt_tokens);
    req.request_id = m.request_id;
    req.sequence_index = m.index;
    req.mode = work.sample_mode;
    req.num_samples = work.num_samples;
    sampling_.Add(sampler_.RowParams(req, &row_scratch_));
    sampled_ids.push_back(work.seq_id);
  }
  if (static_cast<int32_t>(sampling_.rows.size()) != runner_->num_logits_rows()) {
    return absl::InternalError(absl::StrCat("sampling ", sampling_.rows.size(),
                                            " rows but the forward made ",
                                            runner_->num_logits_rows()));
  }
  absl::StatusOr<SamplingResults> got = RunSampling();
  if (!got.ok()) return got.status();
  const SamplingResults& res = *got;
  const int32_t rows = static_cast<int32_t>(sampling_.rows.size());
  const int32_t max_top = sampling_.max_top;
  const int32_t* tokens = res.tokens;
  const float* logprobs = res.logprobs;

  // The CPU Sampler's result shape: kSample rows give num_samples tokens,
  // each with the row's top list; beam rows give min(num_samples, vocab)
  // candidates (the GPU marks the rest with -1) and no top lists.
  result->samples.reserve(rows);
  for (int32_t r = 0; r < rows; ++r) {
    const kg::GpuSamplingRow& row = sampling_.rows[r];
    const std::vector<TokenLogprob> top =
        row.mode == static_cast<int32_t>(kernels::cpu::SamplingMode::kSample)
            ? res.TopList(r, max_top, row.num_top_logprobs)
            : std::vector<TokenLogprob>();
    SequenceSamples samples;
    samples.seq_id = sampled_ids[r];
    for (int32_t k = 0; k < row.num_samples; ++k) {
      const int32_t at = row.sample_offset + k;
      if (tokens[at] < 0) break;
      samples.tokens.push_back({tokens[at], logprobs[at], top});
    }
    result->samples.push_back(std::move(samples));
  }
  return absl::OkStatus();
}

std::vector<TokenLogprob> CudaWorker::SamplingResults::TopList(size_t row, int32_t max_top,
                                                               int32_t n) const {
  std::vector<TokenLogprob> top;
  for (int32_t j = 0; j < n; ++j) {
    const size_t at = row * size_t(max_top) + size_t(j);
    if (top_ids[at] < 0) break;  // past the vocabulary
    top.push_back({top_ids[at], top_logprobs[at]});
  }
  return top;
}

absl::StatusOr<CudaWorker::SamplingResults> CudaWorker::RunSampling() {
  const cudaStream_t stream = runner_->stream();
  const int32_t vocab = config_.vocab_size;
  const int32_t rows = static_cast<int32_t>(sampling_.rows.size());
  const int32_t num_samples = sampling_.num_samples();
  const int32_t max_top = sampling_.max_top;
  if (max_top > kg::kGpuMaxTopLogprobs) {
    return absl::InvalidArgumentError(absl::StrCat("logprobs ", max_top, " above the GPU's ",
                                                   kg::kGpuMaxTopLogprobs));
  }

  // Inputs: rows | history | keys | bias ids | bias values, one pinned
  // staging buffer, one upload.
  const size_t rows_bytes = sizeof(kg::GpuSamplingRow) * sampling_.rows.size();
  const size_t history_bytes = sizeof(int32_t) * sampling_.history.size();
  const size_t keys_bytes = sizeof(uint64_t) * sampling_.keys.size();
  const size_t bias_ids_bytes = sizeof(int32_t) * sampling_.bias_ids.size();
  const size_t bias_values_bytes = sizeof(float) * sampling_.bias_values.size();
  const size_t history_at = Align(rows_bytes), keys_at = history_at + Align(history_bytes);
  const size_t bias_ids_at = keys_at + Align(keys_bytes);
  const size_t bias_values_at = bias_ids_at + Align(bias_ids_bytes);
  const size_t in_bytes = bias_values_at + Align(bias_values_bytes);
  if (absl::Status s = ToAbsl(sampling_staging_.Reserve(in_bytes, "sampling staging"), "CudaWorker");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ToAbsl(sampling_inputs_.Reserve(in_bytes, "sampling inputs"), "CudaWorker");
      !s.ok()) {
    return s;
  }
  uint8_t* staging = sampling_staging_.data();
  std::memcpy(staging, sampling_.rows.data(), rows_bytes);
  if (history_bytes > 0) std::memcpy(staging + history_at, sampling_.history.data(), history_bytes);
  if (keys_bytes > 0) std::memcpy(staging + keys_at, sampling_.keys.data(), keys_bytes);
  if (bias_ids_bytes > 0) {
    std::memcpy(staging + bias_ids_at, sampling_.bias_ids.data(), bias_ids_bytes);
    std::memcpy(staging + bias_values_at, sampling_.bias_values.data(), bias_values_bytes);
  }
  if (absl::Status s = CudaError(cudaMemcpyAsync(sampling_inputs_.data(), staging, in_bytes,
                                                 cudaMemcpyHostToDevice, stream),
                                 "sampling inputs upload");
      !s.ok()) {
    return s;
  }

  // Outputs: tokens | logprobs | token log-probs | top ids | top log-probs.
  const size_t n_top = size_t(rows) * size_t(max_top);
  const size_t logprobs_at = Align(sizeof(int32_t) * num_samples);
  const size_t token_lp_at = logprobs_at + Align(sizeof(float) * num_samples);
  const size_t top_ids_at = token_lp_at + Align(sizeof(float) * rows);
  const size_t top_lp_at = top_ids_at + Align(sizeof(int32_t) * n_top);
  const size_t out_bytes = top_lp_at + Align(sizeof(float) * n_top);
  if (absl::Status s = ToAbsl(sampling_outputs_.Reserve(out_bytes, "sampling outputs"), "CudaWorker");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ToAbsl(sampling_results_.Reserve(out_bytes, "sampling results"), "CudaWorker");
      !s.ok()) {
    return s;
  }
  const size_t ws = kg::SamplingWorkspaceBytes(rows, vocab);
  if (ws == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot sample ", rows, " rows of ", vocab, " logits on the GPU"));
  }
  if (absl::Status s = ToAbsl(sampling_workspace_.Reserve(ws, "sampling workspace"), "CudaWorker");
      !s.ok()) {
    return s;
  }

  uint8_t* dev_in = sampling_inputs_.data();
  kg::GpuSamplingInputs in;
  in.logits = runner_->logits();
  in.vocab = vocab;
  in.rows = sampling_.rows;
  in.rows_dev = reinterpret_cast<const kg::GpuSamplingRow*>(dev_in);
  in.history_dev = history_bytes > 0 ? reinterpret_cast<const int32_t*>(dev_in + history_at) : nullptr;
  in.history_size = static_cast<int64_t>(sampling_.history.size());
  in.keys_dev = keys_bytes > 0 ? reinterpret_cast<const uint64_t*>(dev_in + keys_at) : nullptr;
  in.num_samples = num_samples;
  if (bias_ids_bytes > 0) {
    in.bias_ids_dev = reinterpret_cast<const int32_t*>(dev_in + bias_ids_at);
    in.bias_values_dev = reinterpret_cast<const float*>(dev_in + bias_values_at);
  }
  in.num_biases = sampling_.num_biases();
  uint8_t* dev_out = sampling_outputs_.data();
  kg::GpuSamplingOutputs out;
  out.tokens = reinterpret_cast<int32_t*>(dev_out);
  out.logprobs = reinterpret_cast<float*>(dev_out + logprobs_at);
  out.token_logprobs = reinterpret_cast<float*>(dev_out + token_lp_at);
  out.max_top = max_top;
  if (max_top > 0) {
    out.top_ids = reinterpret_cast<int32_t*>(dev_out + top_ids_at);
    out.top_logprobs = reinterpret_cast<float*>(dev_out + top_lp_at);
  }
  if (absl::Status s = CudaError(kg::SampleRows(in, sampling_workspace_.data(),
                                                sampling_workspace_.bytes(), out, stream),
                                 "SampleRows");
      !s.ok()) {
    return s;
  }
  uint8_t* host = sampling_results_.data();
  if (absl::Status s = CudaError(
          kg::CopySamplingOutputsToHost(out, rows, num_samples, reinterpret_cast<int32_t*>(host),
                                        reinterpret_cast<float*>(host + logprobs_at),
                                        max_top > 0 ? reinterpret_cast<int32_t*>(host + top_ids_at)
                                                    : nullptr,
                                        max_top > 0 ? reinterpret_cast<float*>(host + top_lp_at)
                                                    : nullptr,
                                        stream, reinterpret_cast<float*>(host + token_lp_at)),
          "CopySamplingOutputsToHost");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CudaError(cudaStreamSynchronize(stream), "sampling"); !s.ok()) return s;
  SamplingResults res;
  res.tokens = reinterpret_cast<const int32_t*>(host);
  res.logprobs = reinterpret_cast<const float*>(host + logprobs_at);
  res.token_logprobs = reinterpret_cast<const float*>(host + token_lp_at);
  res.top_ids = reinterpret_cast<const int32_t*>(host + top_ids_at);
  res.top_logprobs = reinterpret_cast<const float*>(host + top_lp_at);
  return res;
}

absl::Status CudaWorker::ScoreRows(std::span<const TokenId> targets, int32_t num_top,
                                   std::vector<SampledToken>* scored) {
  if (static_cast<int32_t>(targets.size()) != runner_->num_logits_rows()) {
    return absl::InternalError(absl::StrCat("scoring ", targets.size(), " rows but RowLogits made ",
                                            runner_->num_logits_rows()));
  }
  sampling_.Clear();
  for (const TokenId target : targets) sampling_.AddScoring(target, num_top);
  absl::StatusOr<SamplingResults> got = RunSampling();
  if (!got.ok()) return got.status();
  const int32_t max_top = sampling_.max_top;
  for (size_t r = 0; r < targets.size(); ++r) {
    SampledToken t;
    t.token_id = targets[r];
    t.logprob = got->token_logprobs[r];
    t.top_logprobs = got->TopList(r, max_top, num_top);
    scored->push_back(std::move(t));
  }
  return absl::OkStatus();
}

}  // namespace folio
