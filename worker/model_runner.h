#ifndef FOLIO_WORKER_MODEL_RUNNER_H_
#define FOLIO_WORKER_MODEL_RUNNER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "common/types.h"
#include "kernels/cpu/rope.h"
#include "worker/cache_engine.h"
#include "worker/communicator.h"
#include "worker/forward_batch.h"
#include "worker/model_weights.h"
#include "worker/packed_weights.h"
#include "worker/step_profile.h"

namespace folio {

// Sums partial results across tensor-parallel ranks (Gloo or NCCL) and
// gathers the vocabulary-parallel logits: worker/communicator.h. Kept as a
// name for older callers.
using AllReducer = Communicator;

// Runs a Llama-family model (Llama 2/3, Mistral, Qwen2) on the CPU over the
// paged KV cache: embedding -> layers (RMSNorm, QKV, RoPE, reshape-and-cache,
// paged attention, o-proj, RMSNorm, SwiGLU) -> final norm -> logits of the
// requested rows. GEMMs through PackedGemm on weights packed once at load
// (fp32, bf16 or int8 storage, fp32 arithmetic); activations and the KV
// cache are fp32.
//
// Thread-compatible; owns its activation buffers.
class ModelRunner {
 public:
  // `weights` (its norms, biases and config), `packed` (its GEMM weights,
  // PackedWeights::PackAndRelease), `cache` and `comm` must outlive the
  // runner; `comm` may be null for one rank.
  ModelRunner(const ModelWeights& weights, const PackedWeights& packed, CacheEngine& cache,
              Communicator* comm);

  // logits: [batch.logits_rows.size()][vocab] on rank 0; empty on the other
  // ranks of a tensor-parallel group (the vocabulary-parallel LM head
  // gathers the logits on rank 0).
  absl::Status Forward(const ForwardBatch& batch, std::vector<float>& logits);

  // The logits of more token rows of the last Forward's batch (prompt
  // scoring): [rows.size()][vocab] on rank 0, empty on the others; every rank
  // makes the same call. Valid until the next Forward.
  absl::Status Logits(std::span<const int32_t> rows, std::vector<float>& logits);

  // Where the time of the calls from now on goes (null: nowhere, the default).
  void set_step_times(StepTimes* times) { times_ = times; }

 private:
  absl::Status Attention(int32_t layer, const ForwardBatch& batch, int32_t n);
  absl::Status Mlp(int32_t layer, int32_t n);
  void Norm(const float* weight, int32_t n);  // normed_ = RmsNorm(residual_)
  void AddResidual(int32_t n);                // residual_ += hidden_
  absl::Status AllReduce(int32_t n);          // hidden_ summed over the ranks

  const ModelWeights& w_;
  const PackedWeights& p_;
  CacheEngine& cache_;
  Communicator* const reducer_;
  const kernels::cpu::RotaryEmbedding rope_;
  StepTimes* times_ = nullptr;

  // Activations, grown on demand and reused.
  std::vector<float> logits_scratch_;  // this rank's vocabulary slice of the logits
  std::vector<float> gather_scratch_;  // the logits gather's buffers
  int32_t last_num_tokens_ = 0;  // of the last Forward: the rows Logits may read
  std::vector<float> hidden_, residual_, normed_, qkv_, q_, k_, v_, attn_, gate_up_, act_, rows_;
};

}  // namespace folio

#endif  // FOLIO_WORKER_MODEL_RUNNER_H_
