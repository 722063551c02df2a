// Tensor-core paged decode for fp16 / bf16 caches with grouped-query
// attention (group >= 2; MHA stays on the SIMT kernel, which already streams
// K/V at copy bandwidth).
//
// With GQA every K/V byte feeds `group` query heads. The SIMT kernel does
// that arithmetic on CUDA cores (4 FMAs per byte at group 4) and became
// instruction-bound near 60% of copy bandwidth on an H200. Here one CTA
// (4 warps) per (sequence, KV head, slice[, row chunk]) holds up to 16 query
// heads of the group as the rows of an m16n8k16 tile (zero rows pad a
// smaller group), so scores and P V run on tensor cores and each K/V byte is
// still read once per group.
//
// K/V stream through kStages shared-memory stages of 64 positions (cp.async,
// 16-byte copies, the padded rows of the prefill kernel). The block-table
// entries of a stage are fetched one iteration before its copies are issued
// and handed over in shared memory, so no copy waits on a global load of
// its block id (when every thread looked up its own ids before its copies,
// the L1TEX scoreboard was the top stall in Nsight Compute). Warp w takes
// positions [16w, 16w + 16) of every stage with its own online-softmax state,
// and the four states are merged through shared memory at the end (the
// FlashDecoding split, inside the CTA). One barrier per stage. Q and P are
// rounded to the cache type for the mma, as in the prefill.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/attention_internal.cuh"
#include "kernels/cuda/mma_fragments.cuh"

namespace folio::kernels::gpu::internal {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = kMmaDecodeRows;  // query rows per CTA: one m16 tile
constexpr int kWarpKeys = 16;          // positions per warp per stage
constexpr int kStageKeys = kWarps * kWarpKeys;

template <typename T, int HD>
struct DCfg {
  static constexpr int kStride = kPaddedRow<HD>;
  // Two stages load while one is computed: 64 KiB of K/V in flight per CTA
  // at head_dim 128 (two CTAs per SM), 128 KiB at 256 (one).
  static constexpr int kStages = 3;
  static constexpr int kQElems = kRows * kStride;
  static constexpr int kKVElems = kStageKeys * kStride;  // K (or V) of one stage
  // Block ids of one stage: at most kStageKeys / 8 (the smallest block).
  static constexpr int kStageIds = kStageKeys / 8;
  static constexpr int kPipeBytes =
      (kQElems + kStages * 2 * kKVElems) * 2 + kStages * kStageIds * 4;
  // The merge reuses the same memory: per warp m and l of each row, then
  // the [rows][HD] accumulators.
  static constexpr int kMergeBytes = kWarps * kRows * (HD + 2) * 4;
  static constexpr int kSmemBytes = kPipeBytes > kMergeBytes ? kPipeBytes : kMergeBytes;
  static_assert(sizeof(T) == 2);
};

// grid = (num_kv_heads * row_chunks, num_seqs, max_parts).
template <typename T, int HD>
__global__ void __launch_bounds__(kThreads) MmaDecodeKernel(const AttnParams p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  using C = DCfg<T, HD>;
  T* q_s = reinterpret_cast<T*>(smem_raw);
  T* kv_s = q_s + C::kQElems;  // stage st: K at kv_s + st * 2 * kKVElems, V after it
  // Stage st's block ids at ids_s + st * kStageIds.
  int32_t* ids_s = reinterpret_cast<int32_t*>(kv_s + C::kStages * 2 * C::kKVElems);

  const int s = blockIdx.y;
  const int kvh = blockIdx.x / p.row_chunks;
  const int first = (blockIdx.x % p.row_chunks) * kRows;  // first head of the group
  const int nrows = min(kRows, p.group - first);
  const int part = blockIdx.z;
  const DecodeSlice slice = SliceOf(p, p.context_lens[s], part);
  if (part >= slice.parts) return;  // whole CTA, before any barrier
  const int begin = slice.begin;
  const int end = slice.end;
  const int visible = slice.visible;  // positions before it (window) are masked
  const int parts = slice.parts;

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int g = lane >> 2;  // fragment row within 8
  const int t = lane & 3;   // fragment column pair

  const int32_t* table = p.block_tables + int64_t{s} * p.max_blocks_per_seq;
  const int64_t head_off = int64_t{kvh} * (HD << p.block_shift);
  const int ntiles = (end - begin + kStageKeys - 1) / kStageKeys;
  // Tiles start on block boundaries (begin is DecodeStart plus a multiple of
  // the slice, both multiples of the block size), so tile `tile` spans entries
  // first_id + tile * stage_blocks + [0, stage_blocks).
  const int stage_blocks = kStageKeys >> p.block_shift;
  const int first_id = begin >> p.block_shift;
  // Thread i < stage_blocks fetches entry i of a tile; entries at or past the
  // end are never read (the table may hold anything there).
  auto fetch_id = [&](int tile) -> int32_t {
    const int pos = begin + tile * kStageKeys + (tid << p.block_shift);
    return tid < stage_blocks && tile < ntiles && pos < end
               ? __ldg(table + first_id + tile * stage_blocks + tid)
               : 0;
  };
  auto load = [&](int tile) {
    const int slot = tile % C::kStages;
    const int32_t* ids = ids_s + slot * C::kStageIds;
    const int p0 = begin + tile * kStageKeys;
    T* k_dst = kv_s + slot * 2 * C::kKVElems;
    LoadKvRows<T, HD, kStageKeys, C::kStride, kThreads>(
        k_dst, k_dst + C::kKVElems, p, [&](int pos) { return ids[(pos - p0) >> p.block_shift]; },
        head_off, p0, end, tid);
  };
  // The first kStages - 1 tiles' ids, then their copies.
#pragma unroll
  for (int st = 0; st < C::kStages - 1; ++st) {
    if (tid < stage_blocks) ids_s[st * C::kStageIds + tid] = fetch_id(st);
  }
  __syncthreads();
#pragma unroll
  for (int st = 0; st < C::kStages - 1; ++st) {
    if (st < ntiles) load(st);
    CpAsyncCommit();
  }
  int32_t next_id = fetch_id(C::kStages - 1);  // stored at the top of iteration 0

  // Q rows -> cache type, scaled; padding rows are zeros. Overlaps the loads.
  for (int id = tid; id < kRows * HD / 4; id += kThreads) {
    const int row = id / (HD / 4);
    const int c4 = id % (HD / 4);
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row < nrows) {
      const int64_t off = (int64_t{s} * p.num_heads + kvh * p.group + first + row) * HD;
      x = *reinterpret_cast<const float4*>(p.q + off + c4 * 4);
    }
    const float sc = p.scale_log2;
    const uint2 packed = make_uint2(Pack(x.x * sc, x.y * sc, T{}), Pack(x.z * sc, x.w * sc, T{}));
    *reinterpret_cast<uint2*>(q_s + row * C::kStride + c4 * 4) = packed;
  }

  WarpRows<T, HD> w;
  w.Init();
  const T* qw = q_s + g * C::kStride + 2 * t;  // A fragment base
  for (int it = 0; it < ntiles; ++it) {
    // Tile it + kStages - 1's ids go to the slot of tile it - 1, whose copies
    // every thread issued before the previous barrier.
    const int fill = it + C::kStages - 1;
    if (tid < stage_blocks) ids_s[(fill % C::kStages) * C::kStageIds + tid] = next_id;
    CpAsyncWait<C::kStages - 2>();  // stage `it` landed (this thread's copies)...
    __syncthreads();                // ...and everyone's; all are done with stage it - 1
    if (fill < ntiles) load(fill);  // refills stage it - 1
    CpAsyncCommit();
    next_id = fetch_id(fill + 1);  // in flight during this stage's compute

    const int k0 = begin + it * kStageKeys + warp * kWarpKeys;
    // Nothing to see (warp-uniform); the next barrier is at the loop top.
    if (k0 >= end || k0 + kWarpKeys <= visible) continue;
    const T* ks = kv_s + (it % C::kStages) * 2 * C::kKVElems + warp * kWarpKeys * C::kStride;
    // Positions past the end are zero-filled K, those before `visible` lie
    // outside the window: both masked.
    w.template Attend<kWarpKeys, C::kStride>(qw, ks, ks + C::kKVElems, lane, [&](int col, int) {
      return k0 + col >= end || k0 + col < visible;
    });
  }

  // Merge the four warps' states. The pipeline memory is free once every
  // copy has landed and every warp has left the loop.
  w.FinishSums();
  CpAsyncWait<0>();
  __syncthreads();
  float* red_m = reinterpret_cast<float*>(smem_raw);  // [kWarps][kRows]
  float* red_l = red_m + kWarps * kRows;              // [kWarps][kRows]
  float* red_o = red_l + kWarps * kRows;              // [kWarps][kRows][HD]
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int wr = warp * kRows + g + 8 * r;
    if (t == 0) {
      red_m[wr] = w.m[r];
      red_l[wr] = w.l[r];
    }
#pragma unroll
    for (int nt = 0; nt < HD / 8; ++nt) {
      *reinterpret_cast<float2*>(red_o + wr * HD + nt * 8 + 2 * t) =
          make_float2(w.o[nt][2 * r], w.o[nt][2 * r + 1]);
    }
  }
  __syncthreads();
  for (int idx = tid; idx < nrows * HD; idx += kThreads) {
    const int row = idx / HD;
    const int d = idx % HD;
    float mall = NegInf();
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mall = fmaxf(mall, red_m[w * kRows + row]);
    float sum = 0.0f, acc = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float mw = red_m[w * kRows + row];
      const float sc = mw == NegInf() ? 0.0f : exp2f(mw - mall);  // a warp that saw nothing
      sum += red_l[w * kRows + row] * sc;
      acc += red_o[(w * kRows + row) * HD + d] * sc;
    }
    const int64_t hrow = int64_t{s} * p.num_heads + kvh * p.group + first + row;
    if (parts == 1) {
      p.out[hrow * HD + d] = sum > 0.0f ? acc / sum : 0.0f;
    } else {  // the slice's partial state, as the SIMT kernel leaves it
      const int64_t prow = hrow * p.max_parts + part;
      p.part_acc[prow * HD + d] = acc;
      if (d == 0) {
        p.part_max[prow] = mall;
        p.part_sum[prow] = sum;
      }
    }
  }
}

}  // namespace

cudaError_t LaunchMmaDecode(const AttnParams& p, CacheDtype dtype, int32_t head_dim,
                            int32_t num_seqs, cudaStream_t stream) {
  return DispatchCacheShape<false>(dtype, head_dim, [&](auto type, auto dim) {
    using T = typename decltype(type)::type;
    constexpr int HD = decltype(dim)::value;
    constexpr int kBytes = DCfg<T, HD>::kSmemBytes;
    const cudaError_t err = EnsureDynamicSmem<MmaDecodeKernel<T, HD>, kBytes>();
    if (err != cudaSuccess) return err;
    const dim3 grid(static_cast<unsigned>(p.num_kv_heads * p.row_chunks),
                    static_cast<unsigned>(num_seqs), static_cast<unsigned>(p.max_parts));
    MmaDecodeKernel<T, HD><<<grid, kThreads, kBytes, stream>>>(p);
    return cudaGetLastError();
  });
}

}  // namespace folio::kernels::gpu::internal
