// Paged attention on the CPU: decode (one query token per sequence) and
// prefill chunks (many query tokens per sequence, causal, attending to earlier
// context read from the paged cache). The reference twins of the CUDA
// kernels to come, and the real kernels of CPU workers.
//
// Cache layout (kernels/cache_layout.h): per layer, K and V separately,
//     [num_blocks][num_kv_heads][block_size][head_dim]  fp32.
// Queries/outputs: [tokens][num_heads][head_dim] fp32. Query head h reads KV
// head h / (num_heads / num_kv_heads) (grouped-query attention).
//
// Algorithm: for each (sequence, KV head) the query heads of the group (and,
// in prefill, a tile of query tokens) are processed together, so each K/V
// block is loaded from memory once for the whole group. Keys are visited in
// tiles of kTileTokens positions (a tile spans several blocks) with the
// block-wise online softmax of the PagedAttention / FlashAttention papers:
// running max, rescaled running sum, fp32 accumulation throughout. Inner
// loops run over head_dim and are written for the compiler to vectorize
// (`#pragma omp simd`, no -march needed; on x86-64 Linux with GCC an AVX2
// clone is picked at load time, see kernels/cpu/vec_math.h). While one block
// is computed on, the next one is software-prefetched a few cache lines at a
// time (paged blocks sit at unrelated addresses). Threads (OpenMP, when
// built with it) take work items (sequence, KV head[, query tile | context
// slice]).
//
// Views are trusted: the kernels do no checking. REQUIRES the caller to have
// validated them once with the Validate* helpers below (the layer once when
// the cache is created; tables, lengths and query starts once per step —
// they are the same for every layer).
//
// Thread-safety: the kernels only read q and the cache and write out; calls
// on disjoint outputs may run concurrently. Outputs must not alias inputs.
#ifndef FOLIO_KERNELS_CPU_ATTENTION_H_
#define FOLIO_KERNELS_CPU_ATTENTION_H_

#include <cstdint>
#include <string>

namespace folio::kernels {

// One layer of a paged cache (K and V), fp32, by value. Not owning.
struct PagedKvLayer {
  const float* k = nullptr;  // [num_blocks][num_kv_heads][block_size][head_dim]
  const float* v = nullptr;  // same shape
  int32_t num_blocks = 0;
  int32_t num_kv_heads = 0;
  int32_t block_size = 0;
  int32_t head_dim = 0;  // multiple of 8
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

// Non-null K/V, positive sizes, head_dim a multiple of 8.
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

namespace cpu {

// Positions per online-softmax tile (the unit between two rescales).
inline constexpr int32_t kTileTokens = 64;
// Context slice of the partitioned decode (vLLM's v2 uses 512 as well).
inline constexpr int32_t kDefaultPartitionTokens = 512;

// Decode: one query token per sequence, s < tables.num_seqs.
// q, out: [num_seqs][num_heads][head_dim]. context_lens[s] = tokens of s in
// the cache, the query's own K/V included (written by ReshapeAndCache
// first); a sequence with context 0 gets an all-zero output. When there are
// too few (sequence, KV head) pairs to keep every thread busy and contexts
// are long, this switches to the partitioned variant by itself.
// REQUIRES: ValidatePagedKvLayer(kv), ValidateHeadCounts(num_heads,
// kv.num_kv_heads), ValidateBlockTables(tables, context_lens, ...).
void PagedAttentionDecode(const float* q, const PagedKvLayer& kv, const BlockTables& tables,
                          const int32_t* context_lens, int32_t num_heads, float scale, float* out);

// Decode with every context split into slices of partition_tokens positions
// processed as separate work items, then merged with a softmax-rescale
// reduction (vLLM's paged_attention_v2). Same results as PagedAttentionDecode
// up to fp32 rounding. REQUIRES as above and partition_tokens > 0.
void PagedAttentionDecodePartitioned(const float* q, const PagedKvLayer& kv,
                                     const BlockTables& tables, const int32_t* context_lens,
                                     int32_t num_heads, float scale, int32_t partition_tokens,
                                     float* out);

// Prefill chunks and mixed batches: the query tokens of sequence s are rows
// [query_start[s], query_start[s + 1]) of q/out [num_tokens][num_heads]
// [head_dim]; query i of s sits at position context_lens[s] - query_len + i
// and attends causally to every cached position <= its own (earlier context
// comes from the cache: chunked prefill, prefix-cache hits). A decode is a
// query of length 1. Rows of q/out outside every sequence's range are not
// touched. REQUIRES as PagedAttentionDecode and ValidateQueryStarts.
void PagedAttentionPrefill(const float* q, const PagedKvLayer& kv, const BlockTables& tables,
                           const int32_t* query_start, const int32_t* context_lens,
                           int32_t num_heads, float scale, float* out);

// The same two kernels over a contiguous cache; kv.num_seqs sequences.
// REQUIRES: ValidateContiguousKvLayer(kv), ValidateHeadCounts,
// ValidateContextLens(context_lens, kv.num_seqs, kv.max_seq_len) (and
// ValidateQueryStarts for prefill).
void ContiguousAttentionDecode(const float* q, const ContiguousKvLayer& kv,
                               const int32_t* context_lens, int32_t num_heads, float scale,
                               float* out);
void ContiguousAttentionPrefill(const float* q, const ContiguousKvLayer& kv,
                                const int32_t* query_start, const int32_t* context_lens,
                                int32_t num_heads, float scale, float* out);

// Threads the kernels of this library use (OpenMP's max threads; 1 without
// OpenMP). For benchmarks that want a baseline with the same parallelism.
int32_t KernelThreads();

}  // namespace cpu
}  // namespace folio::kernels

#endif  // FOLIO_KERNELS_CPU_ATTENTION_H_
