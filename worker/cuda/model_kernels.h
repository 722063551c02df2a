// The small glue kernels of the CUDA model runner (worker/cuda/cuda_model.h)
// that are not model math of their own: embedding gather, the QKV split,
// bias add, row gather, fp32 -> bf16 casts. The math kernels (norms, RoPE,
// attention, activations, cache ops) live in kernels/cuda/.
//
// Plain C++ header (no device code). Every function is asynchronous on
// `stream` and returns the launch's cudaError_t; sizes of 0 enqueue nothing.
// bf16 values are passed as their raw 16-bit patterns (uint16_t).
#ifndef FOLIO_WORKER_CUDA_MODEL_KERNELS_H_
#define FOLIO_WORKER_CUDA_MODEL_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace folio::gpu {

// Vocabulary-parallel embedding lookup: out[t][0:hidden] = row
// (ids[t] - vocab_begin) of `table` [vocab_count][hidden] when that row is in
// [0, vocab_count), zeros otherwise (another rank holds it). `table` is fp32
// when table_is_bf16 is false, else bf16. ids: device, n entries.
cudaError_t EmbeddingGather(const void* table, bool table_is_bf16, int32_t vocab_begin,
                            int32_t vocab_count, int32_t hidden, const int32_t* ids, int32_t n,
                            float* out, cudaStream_t stream);

// Splits the fused QKV projection qkv [n][q_width + 2 * kv_width] into
// contiguous q [n][q_width], k [n][kv_width], v [n][kv_width].
cudaError_t SplitQkv(const float* qkv, int32_t n, int32_t q_width, int32_t kv_width, float* q,
                     float* k, float* v, cudaStream_t stream);

// y[i][j] += bias[j] for i < m, j < n; rows of y are ldy floats apart.
cudaError_t AddBias(float* y, const float* bias, int32_t m, int32_t n, int32_t ldy,
                    cudaStream_t stream);

// out[i][0:d] = x[rows[i]][0:d] for i < r. rows: device.
cudaError_t GatherRows(const float* x, int32_t d, const int32_t* rows, int32_t r, float* out,
                       cudaStream_t stream);

// out[i] = bf16(x[i]) (round to nearest even) for i < count.
cudaError_t CastFloatToBf16(const float* x, int64_t count, uint16_t* out, cudaStream_t stream);

// Host: the bf16 pattern of x, round to nearest even (NaN stays NaN).
uint16_t FloatToBf16Bits(float x);

}  // namespace folio::gpu

#endif  // FOLIO_WORKER_CUDA_MODEL_KERNELS_H_
