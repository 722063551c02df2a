#include "worker/model_runner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cache_ops.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/packed_gemm.h"
#include "worker/rope_config.h"
#include "worker/vocab_parallel.h"

namespace folio {
namespace {

void Grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// Positions the rotary table must cover: the model's context, but no more
// than the KV cache can hold (the scheduler caps max_model_len at it) — a
// 1M-position model would otherwise spend 0.5 GB and seconds on a table most of
// which no sequence can reach.
int32_t RopePositions(const ModelConfig& c, const CacheEngine& cache) {
  const int64_t slots = int64_t{cache.options().num_device_blocks} * cache.options().block_size;
  return static_cast<int32_t>(
      std::max<int64_t>(1, std::min<int64_t>(c.MaxModelLen(), slots)));
}

}  // namespace

ModelRunner::ModelRunner(const ModelWeights& weights, const PackedWeights& packed,
                         CacheEngine& cache, Communicator* comm)
    : w_(weights),
      p_(packed),
      cache_(cache),
      reducer_(comm),
      rope_(weights.config.head_dim, weights.config.rope_theta, RopeScalingOf(weights.config),
            RopePositions(weights.config, cache)) {}

absl::Status ModelRunner::Forward(const ForwardBatch& batch, std::vector<float>& logits) {
  const ModelConfig& c = w_.config;
  const int32_t n = batch.num_tokens();
  const int32_t d = c.hidden_size;
  last_num_tokens_ = 0;
  if (n == 0) {
    logits.clear();
    return absl::OkStatus();
  }
  Grow(hidden_, size_t(n) * d);
  Grow(residual_, size_t(n) * d);
  Grow(normed_, size_t(n) * d);
  for (int32_t t = 0; t < n; ++t) {
    const TokenId id = batch.token_ids[t];
    if (id < 0 || id >= c.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is out of vocabulary (size ", c.vocab_size, ")"));
    }
  }
  {
    ScopedStepPart part(times_, StepPart::kEmbed);
    if (absl::Status s = VocabParallelEmbed(w_, p_.embedding(), reducer_, batch.token_ids.data(),
                                            n, residual_.data());
        !s.ok()) {
      return s;
    }
  }
  // residual_ carries the stream; normed_ is each sub-layer's input.
  for (int32_t layer = 0; layer < c.num_layers; ++layer) {
    const LayerWeights& L = w_.layers[layer];
    Norm(L.input_norm.data(), n);
    if (absl::Status s = Attention(layer, batch, n); !s.ok()) return s;
    // residual += attention output (hidden_), then the MLP's input norm.
    AddResidual(n);
    Norm(L.post_attention_norm.data(), n);
    if (absl::Status s = Mlp(layer, n); !s.ok()) return s;
    AddResidual(n);
  }
  last_num_tokens_ = n;
  return Logits(batch.logits_rows, logits);
}

void ModelRunner::Norm(const float* weight, int32_t n) {
  ScopedStepPart part(times_, StepPart::kNorm);
  const ModelConfig& c = w_.config;
  kernels::cpu::RmsNorm(residual_.data(), weight, n, c.hidden_size, c.rms_norm_eps,
                        normed_.data());
}

void ModelRunner::AddResidual(int32_t n) {
  ScopedStepPart part(times_, StepPart::kResidual);
  const size_t elems = size_t(n) * w_.config.hidden_size;
  for (size_t i = 0; i < elems; ++i) residual_[i] += hidden_[i];
}

absl::Status ModelRunner::AllReduce(int32_t n) {
  if (reducer_ == nullptr) return absl::OkStatus();
  ScopedStepPart part(times_, StepPart::kAllReduce);
  return reducer_->AllReduceSum(hidden_.data(), int64_t{n} * w_.config.hidden_size);
}

absl::Status ModelRunner::Logits(std::span<const int32_t> rows, std::vector<float>& logits) {
  const ModelConfig& c = w_.config;
  const int32_t d = c.hidden_size;
  // Final norm and LM head only for the rows asked for.
  const int32_t r = static_cast<int32_t>(rows.size());
  for (int32_t row : rows) {
    if (row < 0 || row >= last_num_tokens_) {
      return absl::InvalidArgumentError(absl::StrCat("logits row ", row, " is outside the batch of ",
                                                     last_num_tokens_, " tokens"));
    }
  }
  Grow(rows_, size_t(r) * d);
  {
    ScopedStepPart part(times_, StepPart::kNorm);
    for (int32_t i = 0; i < r; ++i) {
      kernels::cpu::RmsNorm(&residual_[size_t(rows[i]) * d], w_.final_norm.data(), 1, d,
                            c.rms_norm_eps, &rows_[size_t(i) * d]);
    }
  }
  ScopedStepPart part(times_, StepPart::kLmHead);
  if (reducer_ == nullptr || reducer_->world_size() == 1) {
    logits.resize(size_t(r) * c.vocab_size);
    if (r > 0) kernels::cpu::PackedGemm(rows_.data(), r, p_.lm_head, logits.data());
    return absl::OkStatus();
  }
  // Vocabulary-parallel LM head: this rank's slice, gathered on rank 0.
  const int32_t slice = w_.shape.vocab_count;
  Grow(logits_scratch_, size_t(r) * slice);
  if (r > 0) kernels::cpu::PackedGemm(rows_.data(), r, p_.lm_head, logits_scratch_.data());
  return GatherVocabParallelLogits(w_, *reducer_, logits_scratch_.data(), r, gather_scratch_,
                                   logits);
}

absl::Status ModelRunner::Attention(int32_t layer, const ForwardBatch& batch, int32_t n) {
  const ModelConfig& c = w_.config;
  const LayerWeights& L = w_.layers[layer];
  const int32_t hd = c.head_dim;
  const int32_t heads = w_.shape.num_heads, kv_heads = w_.shape.num_kv_heads;
  const int32_t q_width = heads * hd, kv_width = kv_heads * hd;
  const int32_t qkv_width = q_width + 2 * kv_width;
  Grow(qkv_, size_t(n) * qkv_width);
  Grow(q_, size_t(n) * q_width);
  Grow(k_, size_t(n) * kv_width);
  Grow(v_, size_t(n) * kv_width);
  {
    ScopedStepPart part(times_, StepPart::kQkvGemm);
    kernels::cpu::PackedGemm(normed_.data(), n, p_.layers[layer].qkv, qkv_.data());
    for (int32_t t = 0; t < n; ++t) {
      float* row = &qkv_[size_t(t) * qkv_width];
      if (!L.qkv_bias.empty()) {
        for (int32_t i = 0; i < qkv_width; ++i) row[i] += L.qkv_bias[i];
      }
      std::memcpy(&q_[size_t(t) * q_width], row, sizeof(float) * q_width);
      std::memcpy(&k_[size_t(t) * kv_width], row + q_width, sizeof(float) * kv_width);
      std::memcpy(&v_[size_t(t) * kv_width], row + q_width + kv_width, sizeof(float) * kv_width);
    }
  }
  std::string error;
  if (!rope_.CheckPositions(batch.positions.data(), n, &error)) {
    return absl::InvalidArgumentError(absl::StrCat("positions: ", error));
  }
  {
    ScopedStepPart part(times_, StepPart::kRope);
    rope_.Apply(batch.positions.data(), n, q_.data(), heads, k_.data(), kv_heads);
  }

  const kernels::PagedKvLayer kv = cache_.Layer(layer);
  {
    ScopedStepPart part(times_, StepPart::kKvWrite);
    if (!kernels::cpu::ReshapeAndCache(k_.data(), v_.data(), batch.slot_mapping.data(), n,
                                       cache_.shape(), cache_.dtype(), cache_.LayerView(layer),
                                       &error)) {
      return absl::InternalError(absl::StrCat("reshape_and_cache, layer ", layer, ": ", error));
    }
  }
  const kernels::BlockTables tables{batch.block_tables.data(), batch.num_seqs(),
                                    batch.max_blocks_per_seq};
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  Grow(attn_, size_t(n) * q_width);
  {
    ScopedStepPart part(times_, StepPart::kAttention);
    if (n == batch.num_seqs()) {
      kernels::cpu::PagedAttentionDecode(q_.data(), kv, tables, batch.context_lens.data(), heads,
                                         scale, attn_.data(), c.AttentionWindow(layer));
    } else {
      kernels::cpu::PagedAttentionPrefill(q_.data(), kv, tables, batch.query_start.data(),
                                          batch.context_lens.data(), heads, scale, attn_.data(),
                                          c.AttentionWindow(layer));
    }
  }
  {
    ScopedStepPart part(times_, StepPart::kOGemm);
    kernels::cpu::PackedGemm(attn_.data(), n, p_.layers[layer].o_proj, hidden_.data());
  }
  return AllReduce(n);
}

absl::Status ModelRunner::Mlp(int32_t layer, int32_t n) {
  const int32_t inter = w_.shape.intermediate;
  Grow(gate_up_, size_t(n) * 2 * inter);
  Grow(act_, size_t(n) * inter);
  {
    ScopedStepPart part(times_, StepPart::kMlpGemm);
    kernels::cpu::PackedGemm(normed_.data(), n, p_.layers[layer].gate_up, gate_up_.data());
  }
  {
    ScopedStepPart part(times_, StepPart::kActivation);
    kernels::cpu::SiluAndMul(gate_up_.data(), n, inter, act_.data());
  }
  {
    ScopedStepPart part(times_, StepPart::kMlpGemm);
    kernels::cpu::PackedGemm(act_.data(), n, p_.layers[layer].down_proj, hidden_.data());
  }
  return AllReduce(n);
}

}  // namespace folio
