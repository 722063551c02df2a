#include "worker/cuda/cuda_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "kernels/cpu/attention_views.h"
#include "kernels/cpu/rope.h"
#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/cache_ops.cuh"
#include "kernels/cuda/norm.cuh"
#include "kernels/cuda/rope.cuh"
#include "worker/cuda/model_kernels.h"

namespace folio::gpu {
namespace {

namespace kg = kernels::gpu;

std::string Str(int64_t v) { return std::to_string(v); }

size_t Align(size_t v, size_t a) { return (v + a - 1) / a * a; }

// The vocabulary partition of ShardShape::Make: rank q holds
// [Begin(q), Begin(q) + Count(q)).
int32_t VocabBegin(int32_t vocab, int32_t world, int32_t q) {
  return q * (vocab / world) + std::min(q, vocab % world);
}
int32_t VocabCount(int32_t vocab, int32_t world, int32_t q) {
  return vocab / world + (q < vocab % world ? 1 : 0);
}

}  // namespace

CudaModelRunner::~CudaModelRunner() {
  // Queued work may still read the buffers freed below.
  if (stream_.get() != nullptr) cudaStreamSynchronize(stream_.get());
}

CudaStatus CudaModelRunner::Create(const HostModel& model, const Options& options,
                                   std::unique_ptr<CudaModelRunner>* out) {
  std::string error;
  if (!model.Validate(&error)) return CudaStatus::InvalidArgument(error);
  if (options.max_num_tokens <= 0 || options.max_num_seqs <= 0 || options.max_logits_rows < 0 ||
      options.max_model_len < 0) {
    return CudaStatus::InvalidArgument(
        "CudaModelRunner: max_num_tokens and max_num_seqs must be positive");
  }
  std::unique_ptr<CudaModelRunner> r(new CudaModelRunner(options));
  FOLIO_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device), "cudaSetDevice");
  r->coll_ = options.collectives != nullptr ? options.collectives : &r->null_collectives_;
  const int32_t world = r->coll_->world_size(), rank = r->coll_->rank();
  if (world <= 0 || rank < 0 || rank >= world) {
    return CudaStatus::InvalidArgument("CudaModelRunner: bad collectives rank/world_size");
  }
  if (model.vocab_begin != VocabBegin(model.vocab_size, world, rank) ||
      model.vocab_count != VocabCount(model.vocab_size, world, rank) ||
      model.vocab_padded != VocabCount(model.vocab_size, world, 0)) {
    return CudaStatus::InvalidArgument(
        "CudaModelRunner: the model's vocabulary slice [" + Str(model.vocab_begin) + ", +" +
        Str(model.vocab_count) + ") padded " + Str(model.vocab_padded) +
        " is not rank " + Str(rank) + "'s of " + Str(world));
  }
  Dims& d = r->dims_;
  d.hidden = model.hidden;
  d.intermediate = model.intermediate;
  d.num_heads = model.num_heads;
  d.num_kv_heads = model.num_kv_heads;
  d.head_dim = model.head_dim;
  d.vocab_size = model.vocab_size;
  d.vocab_begin = model.vocab_begin;
  d.vocab_count = model.vocab_count;
  d.vocab_padded = model.vocab_padded;
  d.max_position = model.max_position;
  d.rms_eps = model.rms_eps;
  d.tied = model.tied_embeddings;
  FOLIO_RETURN_IF_NOT_OK(r->stream_.Create());
  FOLIO_RETURN_IF_NOT_OK(r->staging_free_.Create());
  const int64_t max_x = int64_t{options.max_num_tokens} *
                        std::max({model.hidden, model.intermediate, model.q_width()});
  FOLIO_RETURN_IF_NOT_OK(
      CublasGemm::Create(options.compute_dtype, r->stream_.get(), max_x, &r->gemm_));
  FOLIO_RETURN_IF_NOT_OK(r->Upload(model));
  FOLIO_RETURN_IF_NOT_OK(r->AllocateActivations());
  FOLIO_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "CudaModelRunner::Create: sync");
  *out = std::move(r);
  return CudaStatus::Ok();
}

CudaStatus CudaModelRunner::UploadMatrix(std::span<const float> host, DeviceBuffer<uint8_t>* out) {
  const int64_t elem = ComputeDtypeBytes(options_.compute_dtype);
  FOLIO_RETURN_IF_NOT_OK(out->Allocate(host.size() * size_t(elem), "weights"));
  weight_bytes_ += static_cast<int64_t>(out->bytes());
  if (options_.compute_dtype == ComputeDtype::kFloat32) {
    FOLIO_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(out->data(), host.data(), host.size_bytes(), cudaMemcpyHostToDevice),
        "cudaMemcpy (weights)");
    return CudaStatus::Ok();
  }
  std::vector<uint16_t> bf16(host.size());
  for (size_t i = 0; i < host.size(); ++i) bf16[i] = FloatToBf16Bits(host[i]);
  FOLIO_CUDA_RETURN_IF_ERROR(cudaMemcpy(out->data(), bf16.data(), bf16.size() * sizeof(uint16_t),
                                        cudaMemcpyHostToDevice),
                             "cudaMemcpy (weights)");
  return CudaStatus::Ok();
}

CudaStatus CudaModelRunner::UploadFloats(std::span<const float> host, DeviceBuffer<float>* out) {
  FOLIO_RETURN_IF_NOT_OK(out->Allocate(host.size(), "weights (fp32)"));
  weight_bytes_ += static_cast<int64_t>(out->bytes());
  if (host.empty()) return CudaStatus::Ok();
  FOLIO_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(out->data(), host.data(), host.size_bytes(), cudaMemcpyHostToDevice),
      "cudaMemcpy (weights)");
  return CudaStatus::Ok();
}

CudaStatus CudaModelRunner::Upload(const HostModel& m) {
  FOLIO_RETURN_IF_NOT_OK(UploadMatrix(m.embed, &embed_));
  if (!m.tied_embeddings) FOLIO_RETURN_IF_NOT_OK(UploadMatrix(m.lm_head, &lm_head_));
  FOLIO_RETURN_IF_NOT_OK(UploadFloats(m.final_norm, &final_norm_));
  layers_.resize(m.layers.size());
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const HostLayer& h = m.layers[i];
    DeviceLayer& L = layers_[i];
    FOLIO_RETURN_IF_NOT_OK(UploadFloats(h.input_norm, &L.input_norm));
    FOLIO_RETURN_IF_NOT_OK(UploadFloats(h.post_attention_norm, &L.post_attention_norm));
    FOLIO_RETURN_IF_NOT_OK(UploadFloats(h.qkv_bias, &L.qkv_bias));
    FOLIO_RETURN_IF_NOT_OK(UploadMatrix(h.qkv, &L.qkv));
    FOLIO_RETURN_IF_NOT_OK(UploadMatrix(h.o_proj, &L.o_proj));
    FOLIO_RETURN_IF_NOT_OK(UploadMatrix(h.gate_up, &L.gate_up));
    FOLIO_RETURN_IF_NOT_OK(UploadMatrix(h.down_proj, &L.down_proj));
    L.sliding_window = h.sliding_window;
  }
  // The CPU runner's RoPE table, computed once on the host and copied.
  const kernels::cpu::RotaryEmbedding rope(m.head_dim, m.rope_theta, m.rope_scaling,
                                           m.max_position);
  FOLIO_RETURN_IF_NOT_OK(UploadFloats(
      std::span<const float>(rope.Cos(0), size_t(m.max_position) * size_t(m.head_dim)),
      &rope_table_));
  return CudaStatus::Ok();
}

CudaModelRunner::StagingLayout CudaModelRunner::Layout(int64_t num_tokens, int64_t num_seqs,
                                                       int64_t table_entries, int64_t num_rows) {
  StagingLayout s;
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t begin = at;
    at = Align(at + bytes, 256);
    return begin;
  };
  s.slots = take(sizeof(int64_t) * size_t(num_tokens));
  s.ids = take(sizeof(int32_t) * size_t(num_tokens));
  s.positions = take(sizeof(int32_t) * size_t(num_tokens));
  s.query_start = take(sizeof(int32_t) * size_t(num_seqs + 1));
  s.context_lens = take(sizeof(int32_t) * size_t(num_seqs));
  s.tables = take(sizeof(int32_t) * size_t(table_entries));
  s.rows = take(sizeof(int32_t) * size_t(num_rows));
  s.total = at;
  return s;
}

CudaStatus CudaModelRunner::AllocateActivations() {
  const Options& o = options_;
  const Dims& d = dims_;
  const size_t n = size_t(o.max_num_tokens);
  const size_t rows = size_t(o.max_logits_rows > 0 ? o.max_logits_rows : o.max_num_seqs);
  const size_t qw = size_t(d.num_heads) * d.head_dim, kvw = size_t(d.num_kv_heads) * d.head_dim;
  FOLIO_RETURN_IF_NOT_OK(residual_.Allocate(n * d.hidden, "activations"));
  FOLIO_RETURN_IF_NOT_OK(a_.Allocate(n * d.hidden, "activations"));
  FOLIO_RETURN_IF_NOT_OK(b_.Allocate(n * d.hidden, "activations"));
  FOLIO_RETURN_IF_NOT_OK(qkv_.Allocate(n * (qw + 2 * kvw), "activations"));
  FOLIO_RETURN_IF_NOT_OK(q_.Allocate(n * qw, "activations"));
  FOLIO_RETURN_IF_NOT_OK(k_.Allocate(n * kvw, "activations"));
  FOLIO_RETURN_IF_NOT_OK(v_.Allocate(n * kvw, "activations"));
  FOLIO_RETURN_IF_NOT_OK(attn_.Allocate(n * qw, "activations"));
  FOLIO_RETURN_IF_NOT_OK(gate_up_.Allocate(n * 2 * d.intermediate, "activations"));
  FOLIO_RETURN_IF_NOT_OK(act_.Allocate(n * d.intermediate, "activations"));
  FOLIO_RETURN_IF_NOT_OK(rows_.Allocate(rows * d.hidden, "activations"));
  FOLIO_RETURN_IF_NOT_OK(scored_rows_.Allocate(rows, "activations"));
  const int32_t world = coll_->world_size();
  if (world > 1) {
    FOLIO_RETURN_IF_NOT_OK(local_logits_.Allocate(rows * d.vocab_padded, "logits (local)"));
    // The padding columns are never written by the GEMM: zero them once.
    FOLIO_CUDA_RETURN_IF_ERROR(cudaMemset(local_logits_.data(), 0, local_logits_.bytes()),
                               "cudaMemset");
    if (coll_->rank() == 0) {
      FOLIO_RETURN_IF_NOT_OK(
          gathered_.Allocate(size_t(world) * rows * d.vocab_padded, "logits (gathered)"));
    }
  }
  if (coll_->rank() == 0) {
    FOLIO_RETURN_IF_NOT_OK(logits_.Allocate(rows * d.vocab_size, "logits"));
  }
  const int32_t max_len = o.max_model_len > 0 ? o.max_model_len : d.max_position;
  const size_t ws = kg::PagedAttentionDecodeWorkspaceBytes(
      o.max_num_seqs, d.num_heads, d.head_dim, max_len, o.decode_partition_tokens);
  FOLIO_RETURN_IF_NOT_OK(decode_workspace_.Allocate(ws, "decode workspace"));
  // Staging for the largest batch, block tables for max_len contexts (16-token blocks or more).
  const int64_t table_entries = int64_t{o.max_num_seqs} * ((max_len + 15) / 16);
  const size_t staging =
      Layout(o.max_num_tokens, o.max_num_seqs, table_entries, int64_t(rows)).total;
  FOLIO_RETURN_IF_NOT_OK(staging_host_.Allocate(staging, "batch staging (pinned)"));
  FOLIO_RETURN_IF_NOT_OK(staging_device_.Allocate(staging, "batch staging"));
  return CudaStatus::Ok();
}

int64_t CudaModelRunner::activation_bytes() const {
  int64_t total = 0;
  for (const DeviceBuffer<float>* b :
       {&residual_, &a_, &b_, &qkv_, &q_, &k_, &v_, &attn_, &gate_up_, &act_, &rows_,
        &local_logits_, &gathered_, &logits_}) {
    total += static_cast<int64_t>(b->bytes());
  }
  total += static_cast<int64_t>(decode_workspace_.bytes() + staging_device_.bytes());
  return total + gemm_->scratch_bytes();
}

CudaStatus CudaModelRunner::CheckBatch(const CudaForwardBatch& b, const CudaKvCache& cache,
                                       int32_t* max_context_len, int32_t* max_query_len,
                                       bool* decode) const {
  const int32_t n = b.num_tokens(), s = b.num_seqs();
  const int32_t r = static_cast<int32_t>(b.logits_rows.size());
  auto bad = [](const std::string& why) { return CudaStatus::InvalidArgument("batch: " + why); };
  const int32_t max_rows = options_.max_logits_rows > 0 ? options_.max_logits_rows
                                                        : options_.max_num_seqs;
  if (n > options_.max_num_tokens || s > options_.max_num_seqs || r > max_rows) {
    return bad(Str(n) + " tokens / " + Str(s) + " sequences / " + Str(r) +
               " logits rows exceed the runner's limits " + Str(options_.max_num_tokens) + " / " +
               Str(options_.max_num_seqs) + " / " + Str(max_rows));
  }
  if (int32_t(b.positions.size()) != n || int32_t(b.slot_mapping.size()) != n) {
    return bad("positions and slot_mapping need one entry per token");
  }
  if (int32_t(b.query_start.size()) != s + 1 || b.max_blocks_per_seq < 0 ||
      int64_t(b.block_tables.size()) != int64_t{s} * b.max_blocks_per_seq) {
    return bad("query_start needs num_seqs + 1 entries and block_tables num_seqs * "
               "max_blocks_per_seq");
  }
  if (s == 0 || b.query_start[0] != 0 || b.query_start[s] != n) {
    return bad("query_start must run from 0 to num_tokens over at least one sequence");
  }
  if (cache.options().num_kv_heads != dims_.num_kv_heads ||
      cache.options().head_dim != dims_.head_dim || cache.options().num_layers != num_layers()) {
    return bad("the KV cache's layers / KV heads / head_dim are not the model's");
  }
  std::string error;
  if (!kernels::ValidateQueryStarts(b.query_start.data(), b.context_lens.data(), s, &error)) {
    return bad(error);
  }
  const int32_t block_size = cache.options().block_size;
  const kernels::BlockTables tables{b.block_tables.data(), s, b.max_blocks_per_seq};
  if (!kernels::ValidateBlockTables(tables, b.context_lens.data(), block_size,
                                    cache.num_device_blocks(), &error)) {
    return bad(error);
  }
  for (int32_t t = 0; t < n; ++t) {
    if (b.token_ids[t] < 0 || b.token_ids[t] >= dims_.vocab_size) {
      return bad("token id " + Str(b.token_ids[t]) + " is out of vocabulary (size " +
                 Str(dims_.vocab_size) + ")");
    }
    if (b.positions[t] < 0 || b.positions[t] >= dims_.max_position) {
      return bad("position " + Str(b.positions[t]) + " outside [0, " + Str(dims_.max_position) +
                 ")");
    }
    const int64_t slot = b.slot_mapping[t];
    if (slot != kernels::kSkipSlot &&
        (slot < 0 || slot >= int64_t{cache.num_device_blocks()} * block_size)) {
      return bad("slot " + Str(slot) + " outside the device pool");
    }
  }
  for (int32_t row : b.logits_rows) {
    if (row < 0 || row >= n) return bad("logits row " + Str(row) + " outside [0, num_tokens)");
  }
  *max_context_len = 0;
  *max_query_len = 0;
  *decode = true;
  for (int32_t i = 0; i < s; ++i) {
    const int32_t q = b.query_start[i + 1] - b.query_start[i];
    *max_context_len = std::max(*max_context_len, b.context_lens[i]);
    *max_query_len = std::max(*max_query_len, q);
    if (q != 1) *decode = false;
  }
  return CudaStatus::Ok();
}

CudaStatus CudaModelRunner::StageBatch(const CudaForwardBatch& b) {
  const int32_t n = b.num_tokens(), s = b.num_seqs();
  const int64_t r = static_cast<int64_t>(b.logits_rows.size());
  staged_ = Layout(n, s, static_cast<int64_t>(b.block_tables.size()), r);
  // The previous upload must be done reading the pinned buffer.
  if (staging_in_flight_) {
    FOLIO_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(staging_free_.get()), "cudaEventSynchronize");
    staging_in_flight_ = false;
  }
  if (staged_.total > staging_host_.size()) {
    // Longer contexts than planned for: grow (queued kernels may still read
    // the old device staging).
    FOLIO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()), "cudaStreamSynchronize");
    FOLIO_RETURN_IF_NOT_OK(staging_host_.Allocate(staged_.total * 2, "batch staging (pinned)"));
    FOLIO_RETURN_IF_NOT_OK(staging_device_.Allocate(staged_.total * 2, "batch staging"));
  }
  uint8_t* h = staging_host_.data();
  std::memcpy(h + staged_.slots, b.slot_mapping.data(), b.slot_mapping.size_bytes());
  std::memcpy(h + staged_.ids, b.token_ids.data(), b.token_ids.size_bytes());
  std::memcpy(h + staged_.positions, b.positions.data(), b.positions.size_bytes());
  std::memcpy(h + staged_.query_start, b.query_start.data(), b.query_start.size_bytes());
  std::memcpy(h + staged_.context_lens, b.context_lens.data(), b.context_lens.size_bytes());
  if (!b.block_tables.empty()) {
    std::memcpy(h + staged_.tables, b.block_tables.data(), b.block_tables.size_bytes());
  }
  if (r > 0) std::memcpy(h + staged_.rows, b.logits_rows.data(), b.logits_rows.size_bytes());
  FOLIO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(staging_device_.data(), h, staged_.total,
                                             cudaMemcpyHostToDevice, stream_.get()),
                             "cudaMemcpyAsync (batch)");
  FOLIO_CUDA_RETURN_IF_ERROR(cudaEventRecord(staging_free_.get(), stream_.get()),
                             "cudaEventRecord");
  staging_in_flight_ = true;
  return CudaStatus::Ok();
}

CudaStatus CudaModelRunner::AllReduce(float* data, int64_t count) {
  if (coll_->world_size() == 1) return CudaStatus::Ok();
  return coll_->AllReduceSum(data, count, stream_.get());
}

CudaStatus CudaModelRunner::Forward(const CudaForwardBatch& b, CudaKvCache& cache) {
  FOLIO_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device), "cudaSetDevice");
  logits_rows_ = 0;
  final_hidden_ = nullptr;
  final_rows_ = 0;
  const int32_t n = b.num_tokens();
  if (n == 0) return CudaStatus::Ok();
  int32_t max_context_len = 0, max_query_len = 0;
  bool decode = false;
  FOLIO_RETURN_IF_NOT_OK(CheckBatch(b, cache, &max_context_len, &max_query_len, &decode));
  FOLIO_RETURN_IF_NOT_OK(StageBatch(b));
  if (decode) {
    const size_t ws = kg::PagedAttentionDecodeWorkspaceBytes(
        b.num_seqs(), dims_.num_heads, dims_.head_dim, max_context_len,
        options_.decode_partition_tokens);
    if (ws > decode_workspace_.size()) {
      FOLIO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()), "cudaStreamSynchronize");
      FOLIO_RETURN_IF_NOT_OK(decode_workspace_.Allocate(ws, "decode workspace"));
    }
  }
  const cudaStream_t st = stream_.get();
  const int32_t d = dims_.hidden;
  const auto* ids =
      reinterpret_cast<const int32_t*>(staging_device_.data() + staged_.ids);
  FOLIO_CUDA_RETURN_IF_ERROR(
      EmbeddingGather(embed_.data(), options_.compute_dtype == ComputeDtype::kBFloat16,
                      dims_.vocab_begin, dims_.vocab_count, d, ids, n, residual_.data(), st),
      "EmbeddingGather");
  FOLIO_RETURN_IF_NOT_OK(AllReduce(residual_.data(), int64_t{n} * d));

  // residual_ carries the stream; x is each sub-layer's input (normed), y
  // its output; FusedAddRmsNorm(y, residual) adds y into the residual and
  // leaves the next input in y, so x and y swap after it.
  float* x = a_.data();
  float* y = b_.data();
  for (int32_t l = 0; l < num_layers(); ++l) {
    const DeviceLayer& L = layers_[l];
    if (l == 0) {
      FOLIO_CUDA_RETURN_IF_ERROR(
          kg::RmsNorm(residual_.data(), L.input_norm.data(), n, d, dims_.rms_eps, x, st),
          "RmsNorm");
    } else {
      FOLIO_CUDA_RETURN_IF_ERROR(kg::FusedAddRmsNorm(y, residual_.data(), L.input_norm.data(), n,
                                                     d, dims_.rms_eps, st),
                                 "FusedAddRmsNorm");
      std::swap(x, y);
    }
    FOLIO_RETURN_IF_NOT_OK(Attention(l, b, cache, max_context_len, max_query_len, decode, x, y));
    FOLIO_CUDA_RETURN_IF_ERROR(kg::FusedAddRmsNorm(y, residual_.data(),
                                                   L.post_attention_norm.data(), n, d,
                                                   dims_.rms_eps, st),
                               "FusedAddRmsNorm");
    std::swap(x, y);
    FOLIO_RETURN_IF_NOT_OK(Mlp(l, n, x, y));
  }
  // Final norm (over every row; cheap next to the layers), then the rows
  // that sample.
  FOLIO_CUDA_RETURN_IF_ERROR(
      kg::FusedAddRmsNorm(y, residual_.data(), final_norm_.data(), n, d, dims_.rms_eps, st),
      "FusedAddRmsNorm (final)");
  final_hidden_ = y;
  final_rows_ = n;
  const auto* rows = reinterpret_cast<const int32_t*>(staging_device_.data() + staged_.rows);
  return LogitsOfRows(rows, static_cast<int32_t>(b.logits_rows.size()));
}

CudaStatus CudaModelRunner::LogitsOfRows(const int32_t* rows, int32_t r) {
  FOLIO_CUDA_RETURN_IF_ERROR(
      GatherRows(final_hidden_, dims_.hidden, rows, r, rows_.data(), stream_.get()), "GatherRows");
  FOLIO_RETURN_IF_NOT_OK(LmHead(r));
  logits_rows_ = coll_->rank() == 0 ? r : 0;
  return CudaStatus::Ok();
}

CudaStatus CudaModelRunner::RowLogits(std::span<const int32_t> rows) {
  FOLIO_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device), "cudaSetDevice");
  logits_rows_ = 0;
  const int32_t r = static_cast<int32_t>(rows.size());
  if (final_hidden_ == nullptr) {
    return CudaStatus::InvalidArgument("RowLogits: no Forward to take rows from");
  }
  if (size_t(r) > scored_rows_.size()) {
    return CudaStatus::InvalidArgument("RowLogits: " + Str(r) + " rows exceed the runner's " +
                                       Str(int64_t(scored_rows_.size())) + " logits rows");
  }
  for (int32_t row : rows) {
    if (row < 0 || row >= final_rows_) {
      return CudaStatus::InvalidArgument("RowLogits: row " + Str(row) +
                                         " is outside the batch of " + Str(final_rows_) +
                                         " tokens");
    }
  }
  if (r == 0) return CudaStatus::Ok();
  // From pageable memory: the copy is staged before the call returns.
  FOLIO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(scored_rows_.data(), rows.data(), rows.size_bytes(),
                                             cudaMemcpyHostToDevice, stream_.get()),
                             "cudaMemcpyAsync (scored rows)");
  return LogitsOfRows(scored_rows_.data(), r);
}

CudaStatus CudaModelRunner::Attention(int32_t layer, const CudaForwardBatch& b,
                                      CudaKvCache& cache, int32_t max_context_len,
                                      int32_t max_query_len, bool decode, const float* x,
                                      float* y) {
  const DeviceLayer& L = layers_[layer];
  const cudaStream_t st = stream_.get();
  const int32_t n = b.num_tokens(), s = b.num_seqs(), d = dims_.hidden;
  const int32_t heads = dims_.num_heads, kv_heads = dims_.num_kv_heads, hd = dims_.head_dim;
  const int32_t qw = heads * hd, kvw = kv_heads * hd;
  uint8_t* staging = staging_device_.data();
  const auto* positions = reinterpret_cast<const int32_t*>(staging + staged_.positions);
  const auto* slots = reinterpret_cast<const int64_t*>(staging + staged_.slots);
  const auto* query_start = reinterpret_cast<const int32_t*>(staging + staged_.query_start);
  const auto* context_lens = reinterpret_cast<const int32_t*>(staging + staged_.context_lens);
  const auto* table_ids = reinterpret_cast<const int32_t*>(staging + staged_.tables);

  FOLIO_RETURN_IF_NOT_OK(gemm_->Linear(x, n, d, L.qkv.data(), qw + 2 * kvw,
                                       L.qkv_bias.empty() ? nullptr : L.qkv_bias.data(),
                                       qkv_.data()));
  FOLIO_CUDA_RETURN_IF_ERROR(SplitQkv(qkv_.data(), n, qw, kvw, q_.data(), k_.data(), v_.data(), st),
                             "SplitQkv");
  FOLIO_CUDA_RETURN_IF_ERROR(kg::ApplyRope(rope_table_.data(), dims_.max_position, hd, positions,
                                           n, q_.data(), heads, k_.data(), kv_heads, st),
                             "ApplyRope");
  FOLIO_CUDA_RETURN_IF_ERROR(kg::ReshapeAndCache(k_.data(), v_.data(), slots, n, cache.shape(),
                                                 cache.dtype(), cache.Layer(layer), st),
                             "ReshapeAndCache");
  const kernels::BlockTables tables{table_ids, s, b.max_blocks_per_seq};
  const kg::GpuPagedKvLayer kv = cache.AttentionLayer(layer);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  if (decode) {
    FOLIO_CUDA_RETURN_IF_ERROR(
        kg::PagedAttentionDecode(q_.data(), kv, tables, context_lens, max_context_len, heads,
                                 scale, decode_workspace_.data(), decode_workspace_.size(),
                                 attn_.data(), st, options_.decode_partition_tokens,
                                 kg::GpuDecodeKernel::kAuto, layers_[layer].sliding_window),
        "PagedAttentionDecode");
  } else {
    FOLIO_CUDA_RETURN_IF_ERROR(
        kg::PagedAttentionPrefill(q_.data(), kv, tables, query_start, context_lens, s,
                                  max_query_len, heads, scale, attn_.data(), st,
                                  layers_[layer].sliding_window),
        "PagedAttentionPrefill");
  }
  FOLIO_RETURN_IF_NOT_OK(gemm_->Linear(attn_.data(), n, qw, L.o_proj.data(), d, nullptr, y));
  return AllReduce(y, int64_t{n} * d);
}

CudaStatus CudaModelRunner::Mlp(int32_t layer, int32_t n, const float* x, float* y) {
  const DeviceLayer& L = layers_[layer];
  const int32_t d = dims_.hidden, inter = dims_.intermediate;
  FOLIO_RETURN_IF_NOT_OK(gemm_->Linear(x, n, d, L.gate_up.data(), 2 * inter, nullptr,
                                       gate_up_.data()));
  FOLIO_CUDA_RETURN_IF_ERROR(kg::SiluAndMul(gate_up_.data(), n, inter, act_.data(), stream_.get()),
                             "SiluAndMul");
  FOLIO_RETURN_IF_NOT_OK(gemm_->Linear(act_.data(), n, inter, L.down_proj.data(), d, nullptr, y));
  return AllReduce(y, int64_t{n} * d);
}

CudaStatus CudaModelRunner::LmHead(int32_t r) {
  if (r == 0) return CudaStatus::Ok();
  const Dims& dm = dims_;
  const void* w = dm.tied ? embed_.data() : lm_head_.data();
  const int32_t world = coll_->world_size();
  if (world == 1) {
    return gemm_->Linear(rows_.data(), r, dm.hidden, w, dm.vocab_count, nullptr, logits_.data());
  }
  // Vocabulary-parallel LM head: this rank's slice into rows vocab_padded
  // apart (the padding columns stay zero), gathered on rank 0, where each
  // rank's block is copied into its columns of the logits.
  FOLIO_RETURN_IF_NOT_OK(gemm_->Linear(rows_.data(), r, dm.hidden, w, dm.vocab_count, nullptr,
                                       local_logits_.data(), dm.vocab_padded));
  const int64_t chunk = int64_t{r} * dm.vocab_padded;
  const bool root = coll_->rank() == 0;
  FOLIO_RETURN_IF_NOT_OK(coll_->GatherToRank0(local_logits_.data(), chunk,
                                              root ? gathered_.data() : nullptr, stream_.get()));
  if (!root) return CudaStatus::Ok();
  for (int32_t q = 0; q < world; ++q) {
    const int32_t begin = VocabBegin(dm.vocab_size, world, q);
    const int32_t count = VocabCount(dm.vocab_size, world, q);
    FOLIO_CUDA_RETURN_IF_ERROR(
        cudaMemcpy2DAsync(logits_.data() + begin, sizeof(float) * size_t(dm.vocab_size),
                          gathered_.data() + size_t(q) * size_t(chunk),
                          sizeof(float) * size_t(dm.vocab_padded), sizeof(float) * size_t(count),
                          size_t(r), cudaMemcpyDeviceToDevice, stream_.get()),
        "cudaMemcpy2DAsync (logits gather)");
  }
  return CudaStatus::Ok();
}

CudaStatus CudaModelRunner::CopyLogitsToHost(std::vector<float>* out) {
  out->resize(size_t(logits_rows_) * size_t(dims_.vocab_size));  // all overwritten
  if (logits_rows_ > 0) {
    FOLIO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out->data(), logits_.data(),
                                               out->size() * sizeof(float),
                                               cudaMemcpyDeviceToHost, stream_.get()),
                               "cudaMemcpyAsync (logits)");
  }
  FOLIO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()), "cudaStreamSynchronize");
  return CudaStatus::Ok();
}

}  // namespace folio::gpu
