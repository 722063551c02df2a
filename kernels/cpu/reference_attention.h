// Naive contiguous attention: the test reference of the paged attention
// kernels (kernels/cpu/attention.h) and, through them, of the CUDA ones.
// Deliberately simple and independent of the kernels: no paging, no tiling,
// no online softmax (a plain max / exp / sum pass), double accumulation.
// Slow; never used to serve.
#ifndef FOLIO_KERNELS_CPU_REFERENCE_ATTENTION_H_
#define FOLIO_KERNELS_CPU_REFERENCE_ATTENTION_H_

#include <cstdint>

namespace folio::kernels::cpu {

// Attention of one sequence over its whole contiguous K/V.
//   k, v: [seq_len][num_kv_heads][head_dim]  (positions 0 .. seq_len-1)
//   q, out: [query_len][num_heads][head_dim]; query i sits at position
//           seq_len - query_len + i and attends causally to positions <= its own
//           (and, with sliding_window W > 0, only to the last W of them:
//           positions p with pos - W < p <= pos).
// Query head h reads KV head h / (num_heads / num_kv_heads).
// REQUIRES: 0 <= query_len <= seq_len, num_heads % num_kv_heads == 0.
void ReferenceAttention(const float* q, const float* k, const float* v, int32_t seq_len,
                        int32_t query_len, int32_t num_heads, int32_t num_kv_heads,
                        int32_t head_dim, float scale, float* out, int32_t sliding_window = 0);

}  // namespace folio::kernels::cpu

#endif  // FOLIO_KERNELS_CPU_REFERENCE_ATTENTION_H_
