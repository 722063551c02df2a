#ifndef FOLIO_WORKER_MODEL_RUNNER_H_
#define FOLIO_WORKER_MODEL_RUNNER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "common/types.h"
#include "kernels/cpu/rope.h"
#include "worker/cache_engine.h"
#include "worker/model_weights.h"

namespace folio {

// One step's flattened batch: every scheduled token, prefill chunks and
// decodes mixed, grouped by sequence.
struct ForwardBatch {
  std::vector<TokenId> token_ids;      // [num_tokens]
  std::vector<int32_t> positions;      // [num_tokens]
  std::vector<int64_t> slot_mapping;   // [num_tokens]: block * block_size + offset
  std::vector<int32_t> query_start;    // [num_seqs + 1]: rows of each sequence
  std::vector<int32_t> context_lens;   // [num_seqs]: cached tokens after this step
  std::vector<int32_t> block_tables;   // [num_seqs][max_blocks_per_seq]
  int32_t max_blocks_per_seq = 0;
  std::vector<int32_t> logits_rows;    // token rows whose next-token logits are needed

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_seqs() const { return static_cast<int32_t>(context_lens.size()); }
  void Clear();
};

// Sums partial results across tensor-parallel ranks (Gloo or NCCL); absent
// for a single rank.
class AllReducer {
 public:
  virtual ~AllReducer() = default;
  virtual absl::Status AllReduceSum(float* data, int64_t count) = 0;
};

// Runs a Llama-family model (Llama 2/3, Mistral, Qwen2) on the CPU over the
// paged KV cache: embedding -> layers (RMSNorm, QKV, RoPE, reshape-and-cache,
// paged attention, o-proj, RMSNorm, SwiGLU) -> final norm -> logits of the
// requested rows. GEMMs through OpenBLAS, fp32.
//
// Thread-compatible; owns its activation buffers.
class ModelRunner {
 public:
  // `weights` and `cache` must outlive the runner; `reducer` may be null.
  ModelRunner(const ModelWeights& weights, CacheEngine& cache, AllReducer* reducer);

  // logits: [batch.logits_rows.size()][vocab].
  absl::Status Forward(const ForwardBatch& batch, std::vector<float>& logits);

 private:
  absl::Status Attention(int32_t layer, const ForwardBatch& batch, int32_t n);
  absl::Status Mlp(int32_t layer, int32_t n);

  const ModelWeights& w_;
  CacheEngine& cache_;
  AllReducer* const reducer_;
  const kernels::cpu::RotaryEmbedding rope_;

  // Activations, grown on demand and reused.
  std::vector<float> hidden_, residual_, normed_, qkv_, q_, k_, v_, attn_, gate_up_, act_, rows_;
};

}  // namespace folio

#endif  // FOLIO_WORKER_MODEL_RUNNER_H_
