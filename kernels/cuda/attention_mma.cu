// Tensor-core paged prefill for fp16 / bf16 caches (FlashAttention-2 style,
// mma.sync.m16n8k16 with fp32 accumulation; sm_80 and later).
//
// A CTA (4 warps) owns 64 flat query rows of one (sequence, KV head): row
// i * group + j is query token i of the sequence with query head j of the
// group, so the heads of a GQA group share every K/V tile and no row is
// padding except at the end of the sequence. Each warp owns 16 rows. The q
// tile is converted once to the cache type (pre-scaled by scale * log2 e)
// in shared memory; K/V tiles of 32 positions are double-buffered with
// cp.async. Per tile a warp computes S = Q K^T (16 x 32, fp32), masks
// positions past each row's causal limit (and before its sliding window, if
// any), updates the online softmax in
// registers (row max/sum shared by the 4 lanes of a quad), rounds P to the
// cache type and accumulates O += P V with V fragments from ldmatrix.trans.
//
// Shared-memory rows are padded (kPaddedRow) so fragment loads are
// conflict-free.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>

#include "kernels/cuda/attention_internal.cuh"
#include "kernels/cuda/mma_fragments.cuh"

namespace folio::kernels::gpu::internal {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kBM = 16 * kWarps;  // query rows per CTA
constexpr int kBN = 32;           // key positions per tile

template <typename T, int HD>
struct MCfg {
  static constexpr int kStride = kPaddedRow<HD>;  // of the Q tile
  // Padded K/V rows too: with SwizzledRows (what the decode uses) this
  // compute-bound kernel ran 7-8% slower on an H200 (the XOR in every
  // fragment address), docs/performance.md.
  using KvLayout = PaddedRows<kStride>;
  static constexpr int kQElems = kBM * kStride;
  static constexpr int kKVElems = kBN * KvLayout::kRowElems;
  static constexpr int kSmemBytes = (kQElems + 2 * 2 * kKVElems) * static_cast<int>(sizeof(T));
  static_assert(sizeof(T) == 2);
};

// grid = (ceil(max_query_len * group / 64), num_seqs, num_kv_heads).
template <typename T, int HD>
__global__ void __launch_bounds__(kThreads) MmaPrefillKernel(const AttnParams p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  using C = MCfg<T, HD>;
  T* q_s = reinterpret_cast<T*>(smem_raw);
  T* kv_s = q_s + C::kQElems;  // stage st: K at kv_s + st * 2 * kKVElems, V after it

  const int s = blockIdx.y;
  const int kvh = blockIdx.z;
  const int q0 = p.query_start[s];
  const int qlen = p.query_start[s + 1] - q0;
  const int len = p.context_lens[s];
  const int past = len - qlen;
  const int rows_total = qlen * p.group;
  const int r0 = blockIdx.x * kBM;
  if (r0 >= rows_total) return;  // whole CTA, before any barrier
  const int nrows = min(kBM, rows_total - r0);
  const int end = past + (r0 + nrows - 1) / p.group + 1;  // keys the last row sees
  // The first key the first row sees (its window's start; 0 without one).
  const int begin = WindowStart(past + r0 / p.group, p.sliding_window);

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int g = lane >> 2;  // fragment row within 8
  const int t = lane & 3;   // fragment column pair

  const int32_t* table = p.block_tables + int64_t{s} * p.max_blocks_per_seq;
  const int64_t head_off = int64_t{kvh} * (HD << p.block_shift);
  const int ntiles = (end - begin + kBN - 1) / kBN;
  auto block_of = [&](int pos) { return __ldg(table + (pos >> p.block_shift)); };
  auto load = [&](T* stage, int p0) {
    LoadKvRows<T, HD, kBN, typename C::KvLayout, kThreads>(stage, stage + C::kKVElems, p,
                                                           block_of, head_off, p0, end, tid);
  };
  load(kv_s, begin);
  CpAsyncCommit();

  // Q tile -> cache type, scaled; padding rows are zeros. Overlaps tile 0.
  for (int id = tid; id < kBM * HD / 4; id += kThreads) {
    const int row = id / (HD / 4);
    const int c4 = id % (HD / 4);
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row < nrows) {
      const int flat = r0 + row;
      const int64_t off =
          ((int64_t{q0} + flat / p.group) * p.num_heads + kvh * p.group + flat % p.group) * HD;
      x = *reinterpret_cast<const float4*>(p.q + off + c4 * 4);
    }
    const float sc = p.scale_log2;
    const uint2 packed = make_uint2(Pack(x.x * sc, x.y * sc, T{}), Pack(x.z * sc, x.w * sc, T{}));
    *reinterpret_cast<uint2*>(q_s + row * C::kStride + c4 * 4) = packed;
  }

  // This thread's two rows (warp * 16 + g and + 8) see positions
  // [first, limit]; limit -1 is a padding row.
  int first[2], limit[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = warp * 16 + g + 8 * r;
    limit[r] = row < nrows ? past + (r0 + row) / p.group : -1;
    first[r] = WindowStart(limit[r], p.sliding_window);
  }
  WarpRows<T, HD> w;
  w.Init();
  const T* qw = q_s + (warp * 16 + g) * C::kStride + 2 * t;  // A fragment base
  for (int it = 0; it < ntiles; ++it) {
    if (it + 1 < ntiles) load(kv_s + ((it + 1) & 1) * 2 * C::kKVElems, begin + (it + 1) * kBN);
    CpAsyncCommit();
    CpAsyncWait<1>();  // tile it landed (this thread's copies)...
    __syncthreads();   // ...and everyone's; the q tile too
    const T* ks = kv_s + (it & 1) * 2 * C::kKVElems;
    const int k0 = begin + it * kBN;
    // Causal: row r sees positions up to its own (and, with a window, only
    // the last sliding_window of them).
    w.template Attend<kBN, C::kStride, typename C::KvLayout>(
        qw, ks, ks + C::kKVElems, lane,
        [&](int col, int r) { return k0 + col > limit[r] || k0 + col < first[r]; });
    __syncthreads();  // this stage is refilled by the next iteration's copies
  }

  // Store acc / l.
  w.FinishSums();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = warp * 16 + g + 8 * r;
    if (row >= nrows) continue;
    const int flat = r0 + row;
    float* dst =
        p.out +
        ((int64_t{q0} + flat / p.group) * p.num_heads + kvh * p.group + flat % p.group) * HD +
        2 * t;
    const float inv = w.l[r] > 0.0f ? 1.0f / w.l[r] : 0.0f;
#pragma unroll
    for (int nt = 0; nt < HD / 8; ++nt) {
      *reinterpret_cast<float2*>(dst + nt * 8) =
          make_float2(w.o[nt][2 * r] * inv, w.o[nt][2 * r + 1] * inv);
    }
  }
}

}  // namespace

cudaError_t LaunchMmaPrefill(const AttnParams& p, CacheDtype dtype, int32_t head_dim,
                             int32_t num_seqs, int32_t max_query_len, cudaStream_t stream) {
  return DispatchCacheShape<false>(dtype, head_dim, [&](auto type, auto dim) {
    using T = typename decltype(type)::type;
    constexpr int HD = decltype(dim)::value;
    constexpr int kBytes = MCfg<T, HD>::kSmemBytes;
    const cudaError_t err = EnsureDynamicSmem<MmaPrefillKernel<T, HD>, kBytes>();
    if (err != cudaSuccess) return err;
    const int64_t rows = int64_t{max_query_len} * p.group;
    const dim3 grid(static_cast<unsigned>((rows + kBM - 1) / kBM), static_cast<unsigned>(num_seqs),
                    static_cast<unsigned>(p.num_kv_heads));
    MmaPrefillKernel<T, HD><<<grid, kThreads, kBytes, stream>>>(p);
    return cudaGetLastError();
  });
}

}  // namespace folio::kernels::gpu::internal
