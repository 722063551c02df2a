// Runs a Llama-family model (Llama 2/3, Mistral, Qwen2) on one CUDA device
// over the paged KV cache of a CudaKvCache: the twin of worker/model_runner.h
// (CPU), layer for layer:
//   embedding gather (vocabulary-parallel: rows of other ranks are zero, then
//   all-reduced) -> per layer: RmsNorm (layer 0) / FusedAddRmsNorm, QKV GEMM
//   (+bias), split, RoPE, ReshapeAndCache, paged attention (decode kernel
//   when every sequence has exactly one query token, else prefill), o-proj
//   GEMM, all-reduce, FusedAddRmsNorm, gate_up GEMM, SiluAndMul, down GEMM,
//   all-reduce -> final FusedAddRmsNorm -> LM-head GEMM on the logits rows
//   only -> gather of the vocabulary slices on rank 0.
// GEMMs through cuBLAS (cublas_gemm.h) with fp32 or bf16 weights; norms,
// biases and all activations are fp32; the cache dtype is the cache's.
//
// Create() uploads the weights and allocates every activation buffer for the
// largest batch of the options, so a Forward within those limits allocates
// nothing. A Forward uploads the batch's host arrays with one
// cudaMemcpyAsync of a packed pinned staging buffer and queues all of its
// work on the runner's stream; it blocks the host only inside collectives
// of more than one rank (NcclCollectives synchronizes), never for one rank.
//
// Thread-compatible: one thread drives a runner (and makes its device current).
#ifndef FOLIO_WORKER_CUDA_CUDA_MODEL_H_
#define FOLIO_WORKER_CUDA_CUDA_MODEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "worker/cuda/cublas_gemm.h"
#include "worker/cuda/cuda_kv_cache.h"
#include "worker/cuda/cuda_status.h"
#include "worker/cuda/device_buffer.h"
#include "worker/cuda/device_collectives.h"
#include "worker/cuda/host_model.h"

namespace folio::gpu {

// One step's flattened batch, host memory: the arrays of
// worker/model_runner.h's ForwardBatch (std::vectors convert implicitly).
struct CudaForwardBatch {
  std::span<const int32_t> token_ids;     // [num_tokens]
  std::span<const int32_t> positions;     // [num_tokens]
  std::span<const int64_t> slot_mapping;  // [num_tokens]: block * block_size + offset, or -1
  std::span<const int32_t> query_start;   // [num_seqs + 1]: rows of each sequence
  std::span<const int32_t> context_lens;  // [num_seqs]: cached tokens after this step
  std::span<const int32_t> block_tables;  // [num_seqs][max_blocks_per_seq]
  int32_t max_blocks_per_seq = 0;
  std::span<const int32_t> logits_rows;   // token rows whose next-token logits are needed

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_seqs() const { return static_cast<int32_t>(context_lens.size()); }
};

class CudaModelRunner {
 public:
  struct Options {
    ComputeDtype compute_dtype = ComputeDtype::kBFloat16;
    // Largest batch a Forward accepts (InvalidArgument beyond): tokens
    // (activation rows), sequences, and logits rows (0: max_num_seqs).
    int32_t max_num_tokens = 2048;
    int32_t max_num_seqs = 256;
    int32_t max_logits_rows = 0;
    // Longest context a sequence reaches (0: the model's max_position);
    // sizes the decode workspace and the staging of the block tables up
    // front. Longer contexts still work (buffers grow, with a stream sync).
    int32_t max_model_len = 0;
    // Decode split into context slices (vLLM paged_attention_v2); 0: the
    // kernel's default.
    int32_t decode_partition_tokens = 0;
    int32_t device = 0;  // CUDA device ordinal, made current by Create and Forward
    // Tensor parallelism; null means one rank. Must outlive the runner.
    DeviceCollectives* collectives = nullptr;
  };

  // REQUIRES: model.Validate(); with collectives of world_size W and rank r,
  // the vocabulary slice of `model` is rank r's slice of ShardShape's
  // partition (the first vocab % W ranks hold one more row).
  static CudaStatus Create(const HostModel& model, const Options& options,
                           std::unique_ptr<CudaModelRunner>* out);
  ~CudaModelRunner();
  CudaModelRunner(const CudaModelRunner&) = delete;
  CudaModelRunner& operator=(const CudaModelRunner&) = delete;

  // The forward pass of every token of `batch`, writing each token's K/V
  // into `cache` (whose KV heads and head_dim must be the model's) and, on
  // rank 0, the logits of batch.logits_rows to logits() (other ranks: none).
  // Asynchronous: the logits are ready once the runner's stream reaches
  // this point (CopyLogitsToHost waits). InvalidArgument (nothing enqueued)
  // when the batch is inconsistent or beyond the options' limits.
  CudaStatus Forward(const CudaForwardBatch& batch, CudaKvCache& cache);

  // The logits of other token rows of the last Forward's batch (prompt
  // scoring), replacing logits(): rows.size() <= the options' logits rows;
  // every rank makes the same call. Asynchronous like Forward.
  CudaStatus RowLogits(std::span<const int32_t> rows);

  // Device [num_logits_rows()][vocab_size()] of the last Forward or
  // RowLogits (rank 0), valid until the next of either.
  const float* logits() const { return logits_.data(); }
  int32_t num_logits_rows() const { return logits_rows_; }
  int32_t vocab_size() const { return dims_.vocab_size; }
  // Waits for the stream, then copies logits() into *out (resized; empty on
  // ranks other than 0).
  CudaStatus CopyLogitsToHost(std::vector<float>* out);

  cudaStream_t stream() const { return stream_.get(); }
  const Options& options() const { return options_; }
  int32_t num_layers() const { return static_cast<int32_t>(layers_.size()); }
  int32_t num_kv_heads() const { return dims_.num_kv_heads; }
  int32_t head_dim() const { return dims_.head_dim; }
  int32_t max_position() const { return dims_.max_position; }
  // Device bytes of the weights (and the RoPE table) / of the activation
  // buffers, staging, attention workspace and GEMM scratch.
  int64_t weight_bytes() const { return weight_bytes_; }
  int64_t activation_bytes() const;

 private:
  struct Dims {
    int32_t hidden = 0, intermediate = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
    int32_t vocab_size = 0, vocab_begin = 0, vocab_count = 0, vocab_padded = 0;
    int32_t max_position = 0;
    float rms_eps = 0.0f;
    bool tied = false;
  };
  struct DeviceLayer {
    DeviceBuffer<float> input_norm, post_attention_norm, qkv_bias;
    DeviceBuffer<uint8_t> qkv, o_proj, gate_up, down_proj;  // compute dtype
    int32_t sliding_window = 0;                              // HostLayer's
  };
  // Where the batch's arrays sit in the packed staging buffer (bytes).
  struct StagingLayout {
    size_t slots = 0, ids = 0, positions = 0, query_start = 0, context_lens = 0;
    size_t tables = 0, rows = 0, total = 0;
  };

  explicit CudaModelRunner(const Options& options) : options_(options) {}

  CudaStatus Upload(const HostModel& model);
  CudaStatus UploadMatrix(std::span<const float> host, DeviceBuffer<uint8_t>* out);
  CudaStatus UploadFloats(std::span<const float> host, DeviceBuffer<float>* out);
  CudaStatus AllocateActivations();
  CudaStatus CheckBatch(const CudaForwardBatch& b, const CudaKvCache& cache,
                        int32_t* max_context_len, int32_t* max_query_len, bool* decode) const;
  static StagingLayout Layout(int64_t num_tokens, int64_t num_seqs, int64_t table_entries,
                              int64_t num_rows);
  CudaStatus StageBatch(const CudaForwardBatch& b);
  CudaStatus Attention(int32_t layer, const CudaForwardBatch& b, CudaKvCache& cache,
                       int32_t max_context_len, int32_t max_query_len, bool decode,
                       const float* x, float* y);
  CudaStatus Mlp(int32_t layer, int32_t n, const float* x, float* y);
  CudaStatus LmHead(int32_t r);
  // The logits of `r` rows (device indices) of final_hidden_: gather, LM head.
  CudaStatus LogitsOfRows(const int32_t* rows, int32_t r);
  CudaStatus AllReduce(float* data, int64_t count);

  // Const after Create.
  const Options options_;
  Dims dims_;
  NullCollectives null_collectives_;
  DeviceCollectives* coll_ = nullptr;
  CudaStream stream_;
  std::unique_ptr<CublasGemm> gemm_;
  int64_t weight_bytes_ = 0;

  // Weights.
  DeviceBuffer<uint8_t> embed_, lm_head_;  // compute dtype; lm_head_ empty when tied
  DeviceBuffer<float> final_norm_;
  DeviceBuffer<float> rope_table_;  // [max_position][cos half | sin half]
  std::vector<DeviceLayer> layers_;

  // Activations, sized for the options' largest batch.
  DeviceBuffer<float> residual_, a_, b_, qkv_, q_, k_, v_, attn_, gate_up_, act_;
  DeviceBuffer<float> rows_;         // [max_logits_rows][hidden]
  DeviceBuffer<float> local_logits_; // [max_logits_rows][vocab_padded] (TP only)
  DeviceBuffer<float> gathered_;     // rank 0: [world][max_logits_rows][vocab_padded] (TP only)
  DeviceBuffer<float> logits_;       // rank 0: [max_logits_rows][vocab_size]
  DeviceBuffer<uint8_t> decode_workspace_;
  PinnedBuffer<uint8_t> staging_host_;
  DeviceBuffer<uint8_t> staging_device_;
  CudaEvent staging_free_;           // the last upload of staging_host_ has completed
  bool staging_in_flight_ = false;
  StagingLayout staged_;             // of the batch being run
  int32_t logits_rows_ = 0;          // of the last Forward / RowLogits
  // The last Forward's final-normed hidden rows (one of a_ / b_), for RowLogits.
  const float* final_hidden_ = nullptr;
  int32_t final_rows_ = 0;
  DeviceBuffer<int32_t> scored_rows_;  // RowLogits' row indices
};

}  // namespace folio::gpu

#endif  // FOLIO_WORKER_CUDA_CUDA_MODEL_H_
