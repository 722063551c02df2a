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
// built with it) take work items: (sequence, some or all of its KV heads
// [, context slice]) in decode, (sequence, KV head, query tile) in prefill.
//
// Views are trusted: the kernels do no checking. REQUIRES the caller to have
// validated them once with the Validate* helpers of attention_views.h (the
// layer once when the cache is created; tables, lengths and query starts
// once per step — they are the same for every layer).
//
// Thread-safety: the kernels only read q and the cache and write out; calls
// on disjoint outputs may run concurrently. Outputs must not alias inputs.
#ifndef FOLIO_KERNELS_CPU_ATTENTION_H_
#define FOLIO_KERNELS_CPU_ATTENTION_H_

#include <cstdint>
#include <string>

#include "kernels/cpu/attention_views.h"

namespace folio::kernels {
namespace cpu {

// Positions per online-softmax tile (the unit between two rescales).
inline constexpr int32_t kTileTokens = 64;
// Context slice of the partitioned decode (vLLM's v2 uses 512 as well).
inline constexpr int32_t kDefaultPartitionTokens = 512;

// Sliding-window attention (Mistral, Qwen2): sliding_window W > 0 lets the
// query at position p attend only to positions p - W < j <= p, the last W
// including its own (Hugging Face's mask); 0 (every kernel's default) means
// the whole causal context. Positions outside every query's window are not
// read.

// Decode: one query token per sequence, s < tables.num_seqs.
// q, out: [num_seqs][num_heads][head_dim]. context_lens[s] = tokens of s in
// the cache, the query's own K/V included (written by ReshapeAndCache
// first); a sequence with context 0 gets an all-zero output. The work split
// (see DecodeSplit) adapts to the batch and the thread count.
// REQUIRES: ValidatePagedKvLayer(kv), ValidateHeadCounts(num_heads,
// kv.num_kv_heads), ValidateBlockTables(tables, context_lens, ...),
// sliding_window >= 0.
void PagedAttentionDecode(const float* q, const PagedKvLayer& kv, const BlockTables& tables,
                          const int32_t* context_lens, int32_t num_heads, float scale, float* out,
                          int32_t sliding_window = 0);

// How a decode is cut into work items; 0 fields are chosen automatically
// (what PagedAttentionDecode does).
struct DecodeSplit {
  // KV heads per work item, a divisor of num_kv_heads. More heads per item
  // stream through whole blocks (a block holds every head of its
  // positions); fewer give more items to share among threads. 0: all heads
  // when sequences alone give every thread ~4 items, fewer otherwise.
  int32_t heads_per_item = 0;
  // > 0: every context is split into slices of this many positions, each a
  // separate work item, merged at the end with a softmax-rescale reduction
  // (vLLM's paged_attention_v2). -1: never. 0: slices of
  // kDefaultPartitionTokens only when there are fewer (sequence, KV head)
  // pairs than 2 per thread and some context is >= 2 slices long.
  int32_t partition_tokens = 0;
};

// True when heads_per_item is 0 or a positive divisor of num_kv_heads and
// partition_tokens >= -1.
bool ValidateDecodeSplit(const DecodeSplit& split, int32_t num_kv_heads,
                         std::string* error = nullptr);

// PagedAttentionDecode with an explicit work split. Same results up to fp32
// rounding whatever the split. REQUIRES as PagedAttentionDecode and
// ValidateDecodeSplit(split, kv.num_kv_heads).
void PagedAttentionDecodeSplit(const float* q, const PagedKvLayer& kv, const BlockTables& tables,
                               const int32_t* context_lens, int32_t num_heads, float scale,
                               const DecodeSplit& split, float* out, int32_t sliding_window = 0);

// Prefill chunks and mixed batches: the query tokens of sequence s are rows
// [query_start[s], query_start[s + 1]) of q/out [num_tokens][num_heads]
// [head_dim]; query i of s sits at position context_lens[s] - query_len + i
// and attends causally to every cached position <= its own (earlier context
// comes from the cache: chunked prefill, prefix-cache hits), or to the last
// sliding_window of them. A decode is a query of length 1. Rows of q/out
// outside every sequence's range are not touched. REQUIRES as
// PagedAttentionDecode and ValidateQueryStarts.
void PagedAttentionPrefill(const float* q, const PagedKvLayer& kv, const BlockTables& tables,
                           const int32_t* query_start, const int32_t* context_lens,
                           int32_t num_heads, float scale, float* out,
                           int32_t sliding_window = 0);

// The same two kernels over a contiguous cache; kv.num_seqs sequences.
// REQUIRES: ValidateContiguousKvLayer(kv), ValidateHeadCounts,
// ValidateContextLens(context_lens, kv.num_seqs, kv.max_seq_len) (and
// ValidateQueryStarts for prefill).
void ContiguousAttentionDecode(const float* q, const ContiguousKvLayer& kv,
                               const int32_t* context_lens, int32_t num_heads, float scale,
                               float* out, int32_t sliding_window = 0);
void ContiguousAttentionPrefill(const float* q, const ContiguousKvLayer& kv,
                                const int32_t* query_start, const int32_t* context_lens,
                                int32_t num_heads, float scale, float* out,
                                int32_t sliding_window = 0);

}  // namespace cpu
}  // namespace folio::kernels

#endif  // FOLIO_KERNELS_CPU_ATTENTION_H_
