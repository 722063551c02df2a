// CUDA paged attention, twins of kernels/cpu/attention.h (tested against them
// by tests/gpu/attention_gpu_check.cu): decode (one query token per sequence,
// optionally split into context slices merged with log-sum-exp) and prefill
// chunks / mixed batches (causal over the cache, tensor cores for 16-bit
// caches).
//
// Cache layout (kernels/cache_layout.h): per layer, K and V separately,
//     [num_blocks][num_kv_heads][block_size][head_dim]  of CacheDtype.
// Queries/outputs: fp32 [tokens][num_heads][head_dim]. Query head h reads KV
// head h / (num_heads / num_kv_heads) (grouped-query attention); the query
// heads of a group are computed by one CTA so each K/V byte is read once.
//
// Plain C++ header (no device code) so .cc files of the worker can include
// it. Every call is asynchronous on `stream` and returns a cudaError_t; no
// exceptions. cudaErrorInvalidValue means an argument failed the host-side
// checks and nothing was enqueued. Device-resident inputs (block tables,
// context lengths, query starts) cannot be checked on the host: REQUIRES
// that they passed ValidateBlockTables / ValidateQueryStarts
// (kernels/cpu/attention_views.h) on the host before upload, as the CPU
// kernels require. Table entries past a sequence's last used block are never
// read (any value, e.g. -1), nor are cache slots at positions >= its context.
//
// Sliding-window attention (Mistral, Qwen2), as in the CPU kernels:
// sliding_window W > 0 lets a query at position i see positions
// max(0, i - W + 1) .. i only; 0 means the whole causal context. Blocks that
// lie wholly before every query's window are never read (their table entries
// may hold anything).
//
// Thread-safety: the functions keep no state but a per-device SM-count cache
// (atomics); calls on disjoint outputs may run concurrently. Outputs must not
// alias inputs, and one workspace must not serve two decodes in flight at
// once on different streams.
#ifndef FOLIO_KERNELS_CUDA_ATTENTION_CUH_
#define FOLIO_KERNELS_CUDA_ATTENTION_CUH_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/cache_layout.h"
#include "kernels/cpu/attention_views.h"

// Named gpu, not cuda, so that it cannot hide libcu++'s ::cuda namespace.
namespace folio::kernels::gpu {

// One layer of a paged cache on the device, layout kernels/cache_layout.h.
// A by-value view; owns nothing.
struct GpuPagedKvLayer {
  const void* k = nullptr;  // [num_blocks][num_kv_heads][block_size][head_dim] of dtype
  const void* v = nullptr;
  CacheDtype dtype = CacheDtype::kBFloat16;
  int32_t num_blocks = 0, num_kv_heads = 0, block_size = 0, head_dim = 0;
};

// Host-side check: dtype valid, head_dim in {64, 128, 256}, block_size in
// {8, 16, 32}, K and V non-null and 16-byte aligned, counts > 0. Otherwise
// false with a reason in *error (when error is not null).
bool ValidateGpuPagedKvLayer(const GpuPagedKvLayer& kv, std::string* error = nullptr);

// Context slice of the partitioned decode: the smallest (and the quantum of)
// slice the automatic choice uses.
inline constexpr int32_t kGpuMinAutoPartitionTokens = 256;

// Bytes of scratch the decode needs for this batch (0 when it will not
// partition). partition_tokens as for PagedAttentionDecode: for 0 (auto) the
// result is an upper bound that covers whatever slice the automatic choice
// picks (it depends on the device and num_kv_heads), 0 when max_context_len
// is too short for the automatic choice ever to partition.
size_t PagedAttentionDecodeWorkspaceBytes(int32_t num_seqs, int32_t num_heads, int32_t head_dim,
                                          int32_t max_context_len, int32_t partition_tokens = 0);

// Which decode kernel runs. kAuto: tensor cores for GQA (group >= 2) over
// fp16/bf16 caches, CUDA cores otherwise. The others force one, for
// benchmarks and checks; the tensor-core ones need an fp16/bf16 cache.
// kTensorCores launches one CTA per (sequence, KV head, slice) item, as kAuto
// does; kTensorCoresPersistent launches only as many CTAs as fit on the
// device at once, each taking items in turn with its K/V copies running on
// from one item into the next (measured on an H200: no faster, see
// docs/performance.md; kept for the benchmark).
enum class GpuDecodeKernel : int32_t {
  kAuto = 0,
  kSimt = 1,
  kTensorCores = 2,
  kTensorCoresPersistent = 3,
};

// The slice length the decode will use: -1 (no partitioning) or > 0.
// partition_tokens: -1 -> -1; > 0 -> itself; 0 -> automatic: slice only when
// the CTAs of the unsplit decode would fill fewer than 2 per SM of `num_sms`
// and max_context_len >= 2 * kGpuMinAutoPartitionTokens; then slices of a
// multiple of kGpuMinAutoPartitionTokens such that there are about 4 CTAs
// per SM. The CTA count is that of the kernel `kernel` resolves to for
// `dtype`: one per (sequence, KV head, chunk of query heads), chunks of 16
// heads on tensor cores and of 8 on CUDA cores. Pure function (host),
// exposed for tests.
// Positions the decode reads of a context of up to max_context_len: under a
// sliding window at most its last W, from the start of the block holding the
// first (W + block_size - 1); else max_context_len. What the split cuts.
// Pure function (host), exposed for tests.
int32_t DecodeReadLength(int32_t max_context_len, int32_t sliding_window, int32_t block_size);

int32_t ChooseDecodePartition(int32_t num_seqs, int32_t num_heads, int32_t num_kv_heads,
                              int32_t max_context_len, int32_t partition_tokens, int32_t num_sms,
                              CacheDtype dtype, GpuDecodeKernel kernel);

// Decode: one query token per sequence, s < tables.num_seqs.
// q, out: device fp32 [num_seqs][num_heads][head_dim]; tables.ids and
// context_lens: device memory. context_lens[s] counts the query's own K/V
// (written by ReshapeAndCache first); context 0 -> zero output.
// max_context_len: host value, >= every context_lens[s] (it sizes the grid
// and the workspace; longer contexts would be cut). partition_tokens: 0 auto
// (see ChooseDecodePartition; the SM count of the current device is cached),
// -1 never, > 0 force slices of that many positions (a multiple of
// kv.block_size). workspace: device memory, 16-byte aligned, at least
// PagedAttentionDecodeWorkspaceBytes(num_seqs, num_heads, kv.head_dim,
// max_context_len, partition_tokens) bytes (may be null when that is 0).
// Returns cudaErrorInvalidValue (nothing enqueued) when the workspace is too
// small or an argument is bad (kTensorCores with an fp32 cache, or a
// negative sliding_window, included). With a window the slices cut only the
// positions read (at most W + block_size - 1), so the workspace sized for
// max_context_len is an upper bound.
// REQUIRES: ValidateBlockTables(tables, context_lens, ...) on the host copy.
cudaError_t PagedAttentionDecode(const float* q, const GpuPagedKvLayer& kv,
                                 const BlockTables& tables, const int32_t* context_lens,
                                 int32_t max_context_len, int32_t num_heads, float scale,
                                 void* workspace, size_t workspace_bytes, float* out,
                                 cudaStream_t stream, int32_t partition_tokens = 0,
                                 GpuDecodeKernel kernel = GpuDecodeKernel::kAuto,
                                 int32_t sliding_window = 0);

// Prefill chunks / mixed batches, same semantics as cpu::PagedAttentionPrefill:
// rows [query_start[s], query_start[s+1]) of q/out are sequence s's queries
// at positions context_lens[s] - query_len + i, causal over the cache
// (earlier context from the cache: chunked prefill, prefix hits) and limited
// to the last sliding_window positions when that is > 0. A decode
// is a query of length 1. Rows outside every sequence's range are not
// touched. query_start (num_seqs + 1 entries), context_lens: device.
// max_query_len: host value, >= every query length (sizes the grid).
// num_seqs <= tables.num_seqs. 16-bit caches run on tensor cores (q and the
// softmax probabilities rounded to the cache type, fp32 accumulation);
// fp32 caches on CUDA cores in fp32.
// REQUIRES: ValidateBlockTables and ValidateQueryStarts on the host copies.
cudaError_t PagedAttentionPrefill(const float* q, const GpuPagedKvLayer& kv,
                                  const BlockTables& tables, const int32_t* query_start,
                                  const int32_t* context_lens, int32_t num_seqs,
                                  int32_t max_query_len, int32_t num_heads, float scale,
                                  float* out, cudaStream_t stream, int32_t sliding_window = 0);

}  // namespace folio::kernels::gpu

#endif  // FOLIO_KERNELS_CUDA_ATTENTION_CUH_
