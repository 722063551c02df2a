// Tensor-core paged decode for fp16 / bf16 caches with grouped-query
// attention (group >= 2; MHA stays on the SIMT kernel, which already streams
// K/V at copy bandwidth).
//
// With GQA every K/V byte feeds `group` query heads. The SIMT kernel does
// that arithmetic on CUDA cores (4 FMAs per byte at group 4) and became
// instruction-bound near 60% of copy bandwidth on an H200. Here a CTA (4
// warps) working on an item (sequence, KV head, slice[, row chunk]) holds up
// to 16 query heads of the group as the rows of an m16n8k16 tile (zero rows
// pad a smaller group), so scores and P V run on tensor cores and each K/V
// byte is still read once per group.
//
// By default there is one CTA per item. The persistent launch has only as
// many CTAs as fit on the device at once, each walking every gridDim.x-th
// item with its copy pipeline running on across item boundaries; on an H200
// it was no faster (docs/performance.md), and stays for the benchmark.
//
// K/V stream through kStages shared-memory stages of 64 positions (cp.async,
// 16-byte copies into XOR-swizzled rows, SwizzledRows: into the prefill's
// padded rows, which straddle 128-byte lines, the copies fetched ~1.5x the
// K/V sectors from L2). The block-table
// entries of a stage are fetched one iteration before its copies are issued
// and handed over in shared memory, so no copy waits on a global load of
// its block id (when every thread looked up its own ids before its copies,
// the L1TEX scoreboard was the top stall in Nsight Compute). Warp w takes
// positions [16w, 16w + 16) of every stage with its own online-softmax state,
// and the four states are merged through shared memory at the item's end (the
// FlashDecoding split, inside the CTA). One barrier per stage. Q and P are
// rounded to the cache type for the mma, as in the prefill.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>

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
  static constexpr int kStride = kPaddedRow<HD>;  // of the Q tile
  using KvLayout = SwizzledRows<HD>;
  // Two stages load while one is computed: 64 KiB of K/V in flight per CTA
  // at head_dim 128 (two CTAs per SM), 128 KiB at 256 (one).
  static constexpr int kStages = 3;
  static constexpr int kQElems = kRows * kStride;
  static constexpr int kKVElems = kStageKeys * KvLayout::kRowElems;  // K (or V) of one stage
  // Block ids of one stage: at most kStageKeys / 8 (the smallest block).
  static constexpr int kStageIds = kStageKeys / 8;
  // The merge of the warps' states reuses the Q tile (MergeAndStore).
  static constexpr int kSmemBytes =
      (kQElems + kStages * 2 * kKVElems) * 2 + kStages * kStageIds * 4;
  static_assert(sizeof(T) == 2);
};

// One unit of decode work: query rows [first, first + nrows) of KV head kvh
// of sequence s, over slice `part` of its context (positions [begin, end),
// those before `visible` masked; the context has `parts` slices).
struct Item {
  int s, kvh, first, nrows, part;
  int begin, end, visible, parts;
  int ntiles;  // stages of kStageKeys positions, at least 1: an empty slice
               // still writes
};

// Walks one CTA's items (index blockIdx.x, + gridDim.x, ...; slices past a
// sequence's last are skipped) and the tiles of each, in order. Items are
// numbered with the KV head (and row chunk) fastest, then the sequence, then
// the slice.
struct Cursor {
  Item item;
  int index;  // >= total when done
  int tile;

  __device__ __forceinline__ bool done(int total) const { return index >= total; }

  // From `index` on, the first item with work.
  __device__ __forceinline__ void Seek(const AttnParams& p, int num_seqs, int total, int stride) {
    const int per_seq = p.num_kv_heads * p.row_chunks;
    for (; index < total; index += stride) {
      const int x = index % per_seq;
      const int rest = index / per_seq;
      item.s = rest % num_seqs;
      item.part = rest / num_seqs;
      const DecodeSlice slice = SliceOf(p, p.context_lens[item.s], item.part);
      if (item.part >= slice.parts) continue;
      item.kvh = x / p.row_chunks;
      item.first = (x % p.row_chunks) * kRows;
      item.nrows = min(kRows, p.group - item.first);
      item.begin = slice.begin;
      item.end = slice.end;
      item.visible = slice.visible;
      item.parts = slice.parts;
      item.ntiles = max(1, (slice.end - slice.begin + kStageKeys - 1) / kStageKeys);
      break;
    }
    tile = 0;
  }

  __device__ __forceinline__ void Next(const AttnParams& p, int num_seqs, int total, int stride) {
    if (done(total) || ++tile < item.ntiles) return;
    index += stride;
    Seek(p, num_seqs, total, stride);
  }
};

// Scaled Q rows of the item in the cache type into q_s; the padding rows of
// the m16 tile are zeros.
template <typename T, int HD>
__device__ __forceinline__ void LoadQ(T* q_s, const AttnParams& p, const Item& item, int tid) {
  for (int id = tid; id < kRows * HD / 4; id += kThreads) {
    const int row = id / (HD / 4);
    const int c4 = id % (HD / 4);
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row < item.nrows) {
      const int64_t off =
          (int64_t{item.s} * p.num_heads + item.kvh * p.group + item.first + row) * HD;
      x = *reinterpret_cast<const float4*>(p.q + off + c4 * 4);
    }
    const float sc = p.scale_log2;
    const uint2 packed = make_uint2(Pack(x.x * sc, x.y * sc, T{}), Pack(x.z * sc, x.w * sc, T{}));
    *reinterpret_cast<uint2*>(q_s + row * DCfg<T, HD>::kStride + c4 * 4) = packed;
  }
}

// Merges the four warps' states of the item's rows and writes them: the
// output, or the slice's partial state as the SIMT kernel leaves it. Goes
// through `scratch` (the Q tile, free once the item's last stage is done)
// kMergeRows rows at a time, so the K/V stages of the next item stay in
// flight. Every thread calls it; starts and ends with a barrier.
template <typename T, int HD>
__device__ __forceinline__ void MergeAndStore(const WarpRows<T, HD>& w, const AttnParams& p,
                                              const Item& item, void* scratch, int tid) {
  constexpr int kMergeRows = 2;
  static_assert(kWarps * kMergeRows * (HD + 2) * 4 <= kRows * DCfg<T, HD>::kStride * 2,
                "the merge must fit in the Q tile");
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int g = lane >> 2;
  const int t = lane & 3;
  float* red_m = static_cast<float*>(scratch);  // [kWarps][kMergeRows]
  float* red_l = red_m + kWarps * kMergeRows;   // [kWarps][kMergeRows]
  float* red_o = red_l + kWarps * kMergeRows;   // [kWarps][kMergeRows][HD]
  __syncthreads();                              // every warp is done with the Q tile
  for (int r0 = 0; r0 < item.nrows; r0 += kMergeRows) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int j = g + 8 * r - r0;  // this lane's row r, within the chunk
      if (j < 0 || j >= kMergeRows) continue;
      const int wr = warp * kMergeRows + j;
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
    const int rows = min(kMergeRows, item.nrows - r0);
    for (int idx = tid; idx < rows * HD; idx += kThreads) {
      const int j = idx / HD;
      const int d = idx % HD;
      float mall = NegInf();
#pragma unroll
      for (int v = 0; v < kWarps; ++v) mall = fmaxf(mall, red_m[v * kMergeRows + j]);
      float sum = 0.0f, acc = 0.0f;
#pragma unroll
      for (int v = 0; v < kWarps; ++v) {
        const float mw = red_m[v * kMergeRows + j];
        const float sc = mw == NegInf() ? 0.0f : exp2f(mw - mall);  // a warp that saw nothing
        sum += red_l[v * kMergeRows + j] * sc;
        acc += red_o[(v * kMergeRows + j) * HD + d] * sc;
      }
      const int64_t hrow = int64_t{item.s} * p.num_heads + item.kvh * p.group + item.first + r0 + j;
      if (item.parts == 1) {
        p.out[hrow * HD + d] = sum > 0.0f ? acc / sum : 0.0f;
      } else {
        const int64_t prow = hrow * p.max_parts + item.part;
        p.part_acc[prow * HD + d] = acc;
        if (d == 0) {
          p.part_max[prow] = mall;
          p.part_sum[prow] = sum;
        }
      }
    }
    __syncthreads();  // the chunk is read before the next overwrites it
  }
}

// grid: up to one CTA per item (num_kv_heads * row_chunks * num_seqs *
// max_parts of them); with fewer, each CTA takes every gridDim.x-th item and
// its pipeline runs on from one item's last stage into the next item's
// first, so the copies never drain between items (persistent CTAs).
template <typename T, int HD>
__global__ void __launch_bounds__(kThreads)
    MmaDecodeKernel(const AttnParams p, int num_seqs, int total) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  using C = DCfg<T, HD>;
  T* q_s = reinterpret_cast<T*>(smem_raw);
  T* kv_s = q_s + C::kQElems;  // stage st: K at kv_s + st * 2 * kKVElems, V after it
  // Stage st's block ids at ids_s + st * kStageIds.
  int32_t* ids_s = reinterpret_cast<int32_t*>(kv_s + C::kStages * 2 * C::kKVElems);

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int g = lane >> 2;  // fragment row within 8
  const int t = lane & 3;   // fragment column pair
  const int stride = gridDim.x;

  // Three walks over the same tiles: `comp` computes stage it, `load` issues
  // the copies of stage it + kStages - 1, `fetch` reads the block ids of
  // stage it + kStages.
  Cursor comp;
  comp.index = blockIdx.x;
  comp.Seek(p, num_seqs, total, stride);
  if (comp.done(total)) return;  // whole CTA, before any barrier
  Cursor load = comp;
  Cursor fetch = comp;

  // Tiles start on block boundaries (begin is DecodeStart plus a multiple of
  // the slice, both multiples of the block size), so tile `tile` of an item
  // spans its table entries begin / block_size + tile * stage_blocks + [0,
  // stage_blocks).
  const int stage_blocks = kStageKeys >> p.block_shift;
  // Thread i < stage_blocks fetches entry i of the tile; entries at or past
  // the end are never read (the table may hold anything there).
  auto fetch_id = [&](const Cursor& c) -> int32_t {
    if (tid >= stage_blocks || c.done(total)) return 0;
    const Item& it = c.item;
    const int pos = it.begin + c.tile * kStageKeys + (tid << p.block_shift);
    return pos < it.end ? __ldg(p.block_tables + int64_t{it.s} * p.max_blocks_per_seq +
                                (it.begin >> p.block_shift) + c.tile * stage_blocks + tid)
                        : 0;
  };
  auto issue = [&](const Cursor& c, int slot) {
    if (c.done(total)) return;
    const int32_t* ids = ids_s + slot * C::kStageIds;
    const int p0 = c.item.begin + c.tile * kStageKeys;
    const int64_t head_off = int64_t{c.item.kvh} * (HD << p.block_shift);
    T* k_dst = kv_s + slot * 2 * C::kKVElems;
    LoadKvRows<T, HD, kStageKeys, typename C::KvLayout, kThreads>(
        k_dst, k_dst + C::kKVElems, p, [&](int pos) { return ids[(pos - p0) >> p.block_shift]; },
        head_off, p0, c.item.end, tid);
  };

  // The first kStages - 1 stages' ids, then their copies.
#pragma unroll
  for (int st = 0; st < C::kStages - 1; ++st) {
    if (tid < stage_blocks) ids_s[st * C::kStageIds + tid] = fetch_id(fetch);
    fetch.Next(p, num_seqs, total, stride);
  }
  __syncthreads();
#pragma unroll
  for (int st = 0; st < C::kStages - 1; ++st) {
    issue(load, st);
    load.Next(p, num_seqs, total, stride);
    CpAsyncCommit();
  }
  int32_t next_id = fetch_id(fetch);  // stored at the top of iteration 0
  fetch.Next(p, num_seqs, total, stride);

  LoadQ<T, HD>(q_s, p, comp.item, tid);  // overlaps the copies
  WarpRows<T, HD> w;
  w.Init();
  const T* qw = q_s + g * C::kStride + 2 * t;  // A fragment base
  for (int it = 0;; ++it) {
    // Stage it + kStages - 1's ids go to the slot of stage it - 1, whose
    // copies every thread issued before the previous barrier.
    const int fill = it + C::kStages - 1;
    if (tid < stage_blocks) ids_s[(fill % C::kStages) * C::kStageIds + tid] = next_id;
    CpAsyncWait<C::kStages - 2>();   // stage `it` landed (this thread's copies)...
    __syncthreads();                 // ...and everyone's; all are done with stage it - 1
    issue(load, fill % C::kStages);  // refills stage it - 1
    load.Next(p, num_seqs, total, stride);
    CpAsyncCommit();
    next_id = fetch_id(fetch);  // in flight during this stage's compute
    fetch.Next(p, num_seqs, total, stride);

    const Item& item = comp.item;
    const int k0 = item.begin + comp.tile * kStageKeys + warp * kWarpKeys;
    // A warp with nothing to see skips the math (warp-uniform), not the
    // item's end below.
    if (k0 < item.end && k0 + kWarpKeys > item.visible) {
      // The warp's rows start at a multiple of 8: the swizzle of its local
      // rows is that of the tile's.
      const T* ks =
          kv_s + (it % C::kStages) * 2 * C::kKVElems + warp * kWarpKeys * C::KvLayout::kRowElems;
      // Positions past the end are zero-filled K, those before `visible` lie
      // outside the window: both masked.
      w.template Attend<kWarpKeys, C::kStride, typename C::KvLayout>(
          qw, ks, ks + C::kKVElems, lane,
          [&](int col, int) { return k0 + col >= item.end || k0 + col < item.visible; });
    }
    if (comp.tile + 1 < item.ntiles) {
      ++comp.tile;
      continue;
    }
    // The item's last stage: merge and store it, then start the next item
    // (its first stages are already in flight).
    w.FinishSums();
    MergeAndStore<T, HD>(w, p, item, q_s, tid);
    comp.Next(p, num_seqs, total, stride);
    if (comp.done(total)) break;
    LoadQ<T, HD>(q_s, p, comp.item,
                 tid);  // the barrier at the loop top publishes it
    w.Init();
  }
  CpAsyncWait<0>();  // only empty groups remain; leave none behind
}

}  // namespace

cudaError_t LaunchMmaDecode(const AttnParams& p, CacheDtype dtype, int32_t head_dim,
                            int32_t num_seqs, bool persistent, int32_t num_sms,
                            cudaStream_t stream) {
  return DispatchCacheShape<false>(dtype, head_dim, [&](auto type, auto dim) {
    using T = typename decltype(type)::type;
    constexpr int HD = decltype(dim)::value;
    constexpr int kBytes = DCfg<T, HD>::kSmemBytes;
    constexpr auto kKernel = MmaDecodeKernel<T, HD>;
    cudaError_t err = EnsureDynamicSmem<kKernel, kBytes>();
    if (err != cudaSuccess) return err;
    const int64_t total = int64_t{p.num_kv_heads} * p.row_chunks * num_seqs * int64_t{p.max_parts};
    // Item indices step by the grid size past `total`: keep that in an int.
    if (2 * total > INT32_MAX) return cudaErrorInvalidValue;
    int64_t ctas = total;
    if (persistent) {
      int per_sm = 0;
      err = ResidentCtasPerSm<kKernel, kThreads, kBytes>(&per_sm);
      if (err != cudaSuccess) return err;
      ctas = std::min<int64_t>(total, int64_t{std::max(per_sm, 1)} * std::max(num_sms, 1));
    }
    if (ctas == 0) return cudaSuccess;
    kKernel<<<static_cast<unsigned>(ctas), kThreads, kBytes, stream>>>(p, num_seqs,
                                                                       static_cast<int>(total));
    return cudaGetLastError();
  });
}

}  // namespace folio::kernels::gpu::internal
