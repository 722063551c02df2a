// Internal to kernels/cuda/attention*.cu: kernel parameter blocks, the
// per-path launchers the public entry points (attention.cu) dispatch to, and
// (under __CUDACC__) the launch dispatch and cp.async helpers the kernels
// share.
// Launchers do no argument checking (attention.cu did it) and return the
// launch error.
#ifndef FOLIO_KERNELS_CUDA_ATTENTION_INTERNAL_CUH_
#define FOLIO_KERNELS_CUDA_ATTENTION_INTERNAL_CUH_

#include <cuda_runtime_api.h>
#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#include <cstdint>
#include <type_traits>

#include "kernels/cache_layout.h"

namespace folio::kernels::gpu::internal {

// log2(e): scores are kept in the base-2 domain (q pre-scaled by
// scale * log2(e)) so every exponential is one ex2.approx.
inline constexpr float kLog2e = 1.4426950408889634f;

// Everything a paged-attention kernel needs about the cache and the batch.
struct AttnParams {
  const float* q = nullptr;  // [tokens][num_heads][head_dim]
  float* out = nullptr;      // same shape
  const void* k = nullptr;   // cache layer, see kernels/cache_layout.h
  const void* v = nullptr;
  const int32_t* block_tables = nullptr;  // [num_seqs][max_blocks_per_seq]
  const int32_t* context_lens = nullptr;  // [num_seqs]
  const int32_t* query_start = nullptr;   // prefill only: [num_seqs + 1]
  int32_t max_blocks_per_seq = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t group = 0;           // num_heads / num_kv_heads
  int32_t block_shift = 0;     // log2(block_size)
  float scale_log2 = 0.0f;     // softmax scale * log2(e)
  // > 0: a query at position i sees only positions (i - sliding_window, i]
  // (WindowStart); 0: the whole causal context.
  int32_t sliding_window = 0;

  // SIMT kernel only. Query rows per CTA and how its 4 warps split them:
  // head_warps (1, 2 or 4) warps take different rows, token_warps = 4 /
  // head_warps warps share each row's keys.
  int32_t rows_per_cta = 0;
  int32_t row_chunks = 1;      // decode: CTAs per (sequence, KV head)
  int32_t head_warps = 4;

  // Partitioned decode (partition_tokens > 0): slices of that many
  // positions; sequences of more than one slice leave per-slice partial
  // states in the workspace, [num_seqs][num_heads][max_parts] (+ [head_dim]
  // for the accumulators), merged by the reduce kernel.
  int32_t partition_tokens = 0;
  int32_t max_parts = 1;
  float* part_acc = nullptr;
  float* part_max = nullptr;
  float* part_sum = nullptr;
};

#if defined(__CUDACC__)
#define FOLIO_HOST_DEVICE __host__ __device__
#else
#define FOLIO_HOST_DEVICE
#endif

// The first position a query at `pos` sees: pos - window + 1 (not below 0)
// under a sliding window, else 0. The twin of the CPU kernels' FirstVisible.
FOLIO_HOST_DEVICE inline int32_t WindowStart(int32_t pos, int32_t window) {
  const int32_t first = pos - window + 1;
  return window > 0 && first > 0 ? first : 0;
}

// Where a decode over a context of len positions starts reading K/V: the
// block holding its first visible position. Block-aligned, so the decode's
// slices and tiles start on block boundaries and never touch a block that
// lies wholly before the window; the few positions of that block before the
// window are read but masked.
FOLIO_HOST_DEVICE inline int32_t DecodeStart(int32_t len, int32_t window, int32_t block_shift) {
  return (WindowStart(len - 1, window) >> block_shift) << block_shift;
}

// SIMT (CUDA-core) path: decode for every dtype, and prefill for fp32
// caches. heads_per_thread is 1 or 2 (rows a warp owns).
cudaError_t LaunchSimtDecode(const AttnParams& p, CacheDtype dtype, int32_t head_dim,
                             int32_t heads_per_thread, int32_t num_seqs, cudaStream_t stream);
cudaError_t LaunchDecodeReduce(const AttnParams& p, int32_t head_dim, int32_t num_seqs,
                               cudaStream_t stream);
cudaError_t LaunchSimtPrefill(const AttnParams& p, int32_t head_dim, int32_t num_seqs,
                              int32_t max_query_len, cudaStream_t stream);

// Tensor-core prefill for fp16 / bf16 caches.
cudaError_t LaunchMmaPrefill(const AttnParams& p, CacheDtype dtype, int32_t head_dim,
                             int32_t num_seqs, int32_t max_query_len, cudaStream_t stream);

// Tensor-core decode for fp16 / bf16 caches with GQA (group >= 2): up to
// kMmaDecodeRows query heads per item, p.row_chunks items per KV head (and
// slice). One CTA per item; persistent: only as many CTAs as fit on the
// device's num_sms SMs at once, each taking several items in turn.
inline constexpr int32_t kMmaDecodeRows = 16;
cudaError_t LaunchMmaDecode(const AttnParams& p, CacheDtype dtype, int32_t head_dim,
                            int32_t num_seqs, bool persistent, int32_t num_sms,
                            cudaStream_t stream);

#if defined(__CUDACC__)
// Calls launch(std::integral_constant<int, HD>{}) with head_dim (64, 128 or
// 256) as a compile-time value and returns its result;
// cudaErrorInvalidValue for any other head_dim.
template <class Launch>
cudaError_t DispatchHeadDim(int32_t head_dim, Launch&& launch) {
  switch (head_dim) {
    case 64: return launch(std::integral_constant<int, 64>{});
    case 128: return launch(std::integral_constant<int, 128>{});
    case 256: return launch(std::integral_constant<int, 256>{});
    default: return cudaErrorInvalidValue;
  }
}

// Calls launch(std::type_identity<T>{}, std::integral_constant<int, HD>{})
// with the cache element type of dtype and head_dim as compile-time values;
// cudaErrorInvalidValue for fp32 unless kWithFloat (16-bit-only kernels are
// then never instantiated with float).
template <bool kWithFloat, class Launch>
cudaError_t DispatchCacheShape(CacheDtype dtype, int32_t head_dim, Launch&& launch) {
  auto with_type = [&](auto type) -> cudaError_t {
    return DispatchHeadDim(head_dim, [&](auto dim) { return launch(type, dim); });
  };
  switch (dtype) {
    case CacheDtype::kFloat32:
      if constexpr (kWithFloat) {
        return with_type(std::type_identity<float>{});
      } else {
        return cudaErrorInvalidValue;
      }
    case CacheDtype::kFloat16: return with_type(std::type_identity<__half>{});
    case CacheDtype::kBFloat16: return with_type(std::type_identity<__nv_bfloat16>{});
    default: break;  // int8 / fp8 caches: CPU kernels only so far
  }
  return cudaErrorInvalidValue;
}

// --- Device helpers shared by the kernels (Ampere+ cp.async, sm_80/sm_90).

// Copies 16 bytes global -> shared without going through registers (L1
// bypassed: K/V are streamed once). valid == false writes 16 zero bytes and
// reads nothing, so masked rows of a tile are zeros, never stale data or NaN.
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most n of this thread's committed groups are still pending.
template <int n>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(n) : "memory");
}

// Slice `part` of a decode over a context of len positions: positions
// [begin, end) to read, the first position the query sees (`visible`; the
// positions of [begin, visible) are masked), and how many slices the context
// has (1 when not partitioned). The slices cut [DecodeStart, len).
struct DecodeSlice {
  int begin, end, visible, parts;
};
__device__ __forceinline__ DecodeSlice SliceOf(const AttnParams& p, int len, int part) {
  const int visible = WindowStart(len - 1, p.sliding_window);
  const int start = DecodeStart(len, p.sliding_window, p.block_shift);
  if (p.partition_tokens <= 0) return {start, len, visible, 1};
  const int parts =
      min(p.max_parts, max(1, (len - start + p.partition_tokens - 1) / p.partition_tokens));
  const int begin = start + part * p.partition_tokens;
  return {begin, min(len, begin + p.partition_tokens), visible, parts};
}
#endif  // __CUDACC__

}  // namespace folio::kernels::gpu::internal

#endif  // FOLIO_KERNELS_CUDA_ATTENTION_INTERNAL_CUH_
