// Plain by-value views of the attention kernels' inputs (TensorRT-LLM
// KVBlockArray style): one layer of a paged (or contiguous) KV cache and the
// batch's block tables, validated once on the host and then passed by value
// to every layer's kernel. Backend neutral: the CUDA attention will take the
// same views (this header can then move up to kernels/).
//
// Thread-safety: views are immutable values that own nothing.
#ifndef FOLIO_KERNELS_CPU_ATTENTION_VIEWS_H_
#define FOLIO_KERNELS_CPU_ATTENTION_VIEWS_H_

#include <cstdint>
#include <string>

#include "kernels/cache_layout.h"

namespace folio::kernels {

// One layer of a paged cache (K and V), by value. Not owning. fp32 elements,
// or int8 / fp8 e4m3 codes in quantized blocks of BlockBytes(shape, dtype)
// bytes with their per-KV-head scales (kernels/cache_layout.h).
struct PagedKvLayer {
  const void* k = nullptr;  // [num_blocks][num_kv_heads][block_size][head_dim]
  const void* v = nullptr;  // same shape
  int32_t num_blocks = 0;
  int32_t num_kv_heads = 0;
  int32_t block_size = 0;
  int32_t head_dim = 0;  // multiple of 8
  CacheDtype dtype = CacheDtype::kFloat32;  // kFloat32, kInt8 or kFp8E4m3
};

// Block tables of a batch, row-major [num_seqs][max_blocks_per_seq], by
// value. Entry (s, i) is the cache block holding positions
// [i * block_size, (i + 1) * block_size) of sequence s. Entries past a
// sequence's last used block are never read (any value, e.g. -1).
struct BlockTables {
  const int32_t* ids = nullptr;
  int32_t num_seqs = 0;
  int32_t max_blocks_per_seq = 0;
};

// A contiguous (unpaged) cache of one layer, Hugging Face style: sequence s
// owns positions [0, max_seq_len) of
//     k, v: [num_seqs][num_kv_heads][max_seq_len][head_dim]  fp32.
// Same kernels as the paged cache (one code path, a different address
// function): used for the paged-vs-contiguous comparisons of the tests,
// the benchmark and the model runner.
struct ContiguousKvLayer {
  const float* k = nullptr;
  const float* v = nullptr;
  int32_t num_seqs = 0;
  int32_t num_kv_heads = 0;
  int32_t max_seq_len = 0;
  int32_t head_dim = 0;  // multiple of 8
};

// --- Validation (host; once, not per layer). Each returns true when valid,
// otherwise false with a reason in *error (when error is not null).

// Non-null K/V, positive sizes, head_dim a multiple of 8; a paged layer's
// dtype fp32, int8 or fp8 e4m3.
bool ValidatePagedKvLayer(const PagedKvLayer& kv, std::string* error = nullptr);
bool ValidateContiguousKvLayer(const ContiguousKvLayer& kv, std::string* error = nullptr);

// num_heads > 0 and a multiple of num_kv_heads (> 0).
bool ValidateHeadCounts(int32_t num_heads, int32_t num_kv_heads, std::string* error = nullptr);

// For every sequence s < tables.num_seqs: 0 <= context_lens[s] <=
// max_blocks_per_seq * block_size, and the ceil(context_lens[s] / block_size)
// table entries it uses are block ids in [0, num_blocks).
bool ValidateBlockTables(const BlockTables& tables, const int32_t* context_lens, int32_t block_size,
                         int32_t num_blocks, std::string* error = nullptr);

// For every sequence s < num_seqs: 0 <= context_lens[s] <= max_seq_len.
bool ValidateContextLens(const int32_t* context_lens, int32_t num_seqs, int32_t max_seq_len,
                         std::string* error = nullptr);

// query_start has num_seqs + 1 entries, query_start[0] >= 0, non-decreasing,
// and query_len(s) = query_start[s + 1] - query_start[s] <= context_lens[s].
bool ValidateQueryStarts(const int32_t* query_start, const int32_t* context_lens, int32_t num_seqs,
                         std::string* error = nullptr);

}  // namespace folio::kernels

#endif  // FOLIO_KERNELS_CPU_ATTENTION_VIEWS_H_
