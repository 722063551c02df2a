// CUDA rotary position embedding, twin of cpu::RotaryEmbedding::Apply
// (kernels/cpu/rope.h; tested by tests/gpu/layer_ops_gpu_check.cu): Hugging
// Face "rotate_half" convention, for i < head_dim/2
//     x[i]        <- x[i] * cos - x[i + half] * sin
//     x[i + half] <- x[i + half] * cos + x[i] * sin
// with the cos/sin of the token's position read from the CPU twin's table
// (so theta and Llama 3 rope scaling come with the table, bit for bit).
//
// Plain C++ header (no device code). Asynchronous on `stream`; returns
// cudaErrorInvalidValue, enqueuing nothing, when a host-side check fails.
#ifndef FOLIO_KERNELS_CUDA_ROPE_CUH_
#define FOLIO_KERNELS_CUDA_ROPE_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace folio::kernels::gpu {

// cos_sin: device copy of cpu::RotaryEmbedding's table, [max_position]
// [head_dim] = cos half | sin half (RotaryEmbedding::Cos(0) points at it,
// max_position * head_dim floats). positions: device, num_tokens of them;
// tokens whose position is outside [0, max_position) are skipped (left
// unrotated) rather than read out of bounds. q: device [num_tokens]
// [num_heads][head_dim], k: device [num_tokens][num_kv_heads][head_dim], both
// rotated in place; either may be null (or its head count 0) to skip it.
// REQUIRES: head_dim even and > 0, max_position > 0, num_tokens >= 0, head
// counts >= 0; q and k do not overlap.
cudaError_t ApplyRope(const float* cos_sin, int32_t max_position, int32_t head_dim,
                      const int32_t* positions, int32_t num_tokens, float* q, int32_t num_heads,
                      float* k, int32_t num_kv_heads, cudaStream_t stream);

}  // namespace folio::kernels::gpu

#endif  // FOLIO_KERNELS_CUDA_ROPE_CUH_
