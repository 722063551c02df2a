// SIMT (CUDA-core) paged attention: the decode kernel for every cache dtype,
// the log-sum-exp reduce of the partitioned decode, and the prefill of fp32
// caches. fp32 arithmetic throughout; 16-bit K/V are widened exactly.
//
// One CTA (4 warps) owns a few query rows that share one KV head: in decode
// the query heads of a GQA group (all of them up to 8; larger groups are cut
// into row chunks, separate CTAs), in prefill up to 8 flat (token, head)
// rows. Keys are streamed through shared memory in tiles of 8 KiB of K plus
// 8 KiB of V, kStages tiles in flight (cp.async, 16-byte copies), so every
// K/V byte is read from memory once per CTA however many rows it serves.
//
// Inside a CTA: warp w takes rows {hw, hw + head_warps, ...} (hw = w %
// head_warps) and the keys of token group tw = w / head_warps. Within a warp
// kDX lanes share one key row (16 dims each, a fixed set of 16-byte chunks),
// so 32 / kDX keys are scored at once; the dot product is finished with an
// xor butterfly, which leaves bit-identical sums in every lane of the group.
// Each (lane group, row) keeps its own online-softmax state (running max m,
// running sum l, acc) over the keys it sees; the states are merged once at
// the end (shuffles across lane groups, shared memory across warps). No
// per-tile cross-warp exchange is needed, so a tile costs one barrier.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>

#include "kernels/cuda/attention_internal.cuh"

namespace folio::kernels::gpu::internal {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kStages = 3;
// CTAs per SM the register budget is sized for: 4 (<= 128 registers) with
// one row per thread, 3 (<= 168) with two, which would spill at 128.
constexpr int MinCtasPerSm(int heads_per_thread) { return heads_per_thread == 1 ? 4 : 3; }

__device__ __forceinline__ float NegInf() { return __int_as_float(0xff800000); }

// Widens one 16-byte chunk of storage into floats (4 or 8).
__device__ __forceinline__ void Widen(const uint4& u, float* f, float) {
  f[0] = __uint_as_float(u.x);
  f[1] = __uint_as_float(u.y);
  f[2] = __uint_as_float(u.z);
  f[3] = __uint_as_float(u.w);
}
__device__ __forceinline__ void Widen(const uint4& u, float* f, __nv_bfloat16) {
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {  // bf16 is the top half of an fp32
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}
__device__ __forceinline__ void Widen(const uint4& u, float* f, __half) {
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __half2 h;
    static_assert(sizeof(h) == sizeof(unsigned));
    memcpy(&h, &w[i], sizeof(h));
    const float2 x = __half22float2(h);
    f[2 * i] = x.x;
    f[2 * i + 1] = x.y;
  }
}

// Compile-time shape of the SIMT kernels for storage T and head_dim HD.
template <typename T, int HD>
struct Cfg {
  static constexpr int kVec = 16 / static_cast<int>(sizeof(T));  // elements per chunk
  static constexpr int kDT = 16;                                 // dims per lane
  static constexpr int kDX = HD / kDT;                           // lanes per key row
  static constexpr int kCPL = kDT / kVec;                        // chunks per lane
  static constexpr int kCPR = HD / kVec;                         // chunks per row
  static constexpr int kLPW = 32 / kDX;                          // keys per warp step
  static constexpr int kTK = 8192 / (HD * static_cast<int>(sizeof(T)));  // keys per tile
  static constexpr int kNMax = kTK / kLPW;  // keys per lane group per tile (1 token warp)
  static constexpr int kTileElems = kTK * HD;
  static constexpr int kChunksPerTile = 2 * kTK * kCPR;  // K and V
  static constexpr int kSmemBytes = kStages * 2 * kTileElems * static_cast<int>(sizeof(T));
  static_assert(kDX == 4 || kDX == 8 || kDX == 16);
  static_assert(kTK % (4 * kLPW) == 0, "every lane group needs >= 1 key per tile");
  static_assert(kChunksPerTile % kThreads == 0);
  static_assert(kSmemBytes <= 48 * 1024, "no opt-in needed");

  // With kDX == 4 a quarter warp (the unit of 16-byte shared loads) reads
  // two consecutive key rows; flipping chunk bit 2 on odd rows puts them in
  // different banks. Wider rows need nothing.
  __device__ static int Swizzle(int row, int chunk) {
    return kDX == 4 ? chunk ^ ((row & 1) << 2) : chunk;
  }
};

// Per-thread state of the rows a thread works on: its 16 dims of each row's
// (pre-scaled) query and accumulator, the running max / sum of its lane
// group, and the positions each row may attend to: [first, limit] (limit
// -1: padding row).
template <typename T, int HD, int HPT>
struct SimtRows {
  using C = Cfg<T, HD>;
  float q[HPT][C::kDT];
  float acc[HPT][C::kDT];
  float m[HPT];
  float l[HPT];
  int32_t first[HPT];
  int32_t limit[HPT];
  int64_t q_off[HPT];  // element offset of the row in q / out

  // Dim of element i (< kDT) of this lane: chunk (i / kVec) * kDX + dx.
  __device__ static int Dim(int dx, int i) {
    return ((i / C::kVec) * C::kDX + dx) * C::kVec + i % C::kVec;
  }

  __device__ void LoadQuery(const float* __restrict__ q_all, float scale_log2, int dx) {
#pragma unroll
    for (int h = 0; h < HPT; ++h) {
      m[h] = NegInf();
      l[h] = 0.0f;
#pragma unroll
      for (int i = 0; i < C::kDT; i += 4) {
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (limit[h] >= 0) x = *reinterpret_cast<const float4*>(q_all + q_off[h] + Dim(dx, i));
        q[h][i] = x.x * scale_log2;
        q[h][i + 1] = x.y * scale_log2;
        q[h][i + 2] = x.z * scale_log2;
        q[h][i + 3] = x.w * scale_log2;
        acc[h][i] = acc[h][i + 1] = acc[h][i + 2] = acc[h][i + 3] = 0.0f;
      }
    }
  }

  // Folds state (mo, lo, acc_o) into row h.
  __device__ void Merge(int h, float mo, float lo, const float* acc_o) {
    const float mx = fmaxf(m[h], mo);
    const float a = m[h] == NegInf() ? 0.0f : exp2f(m[h] - mx);
    const float b = mo == NegInf() ? 0.0f : exp2f(mo - mx);
    l[h] = l[h] * a + lo * b;
#pragma unroll
    for (int i = 0; i < C::kDT; ++i) acc[h][i] = acc[h][i] * a + acc_o[i] * b;
    m[h] = mx;
  }
};

// Issues the cp.async copies of the tile of positions [p0, p0 + kTK) of one
// (sequence, KV head) into `stage` (K rows, then V rows). Positions >= end
// are zero-filled without touching the block table or the cache.
template <typename T, int HD>
__device__ __forceinline__ void LoadTile(T* stage, const T* __restrict__ k,
                                         const T* __restrict__ v,
                                         const int32_t* __restrict__ table, int64_t block_stride,
                                         int64_t head_off, int block_shift, int p0, int end,
                                         int tid) {
  using C = Cfg<T, HD>;
  const int block_mask = (1 << block_shift) - 1;
#pragma unroll
  for (int u = 0; u < C::kChunksPerTile / kThreads; ++u) {
    const int id = tid + u * kThreads;
    const int which = id / (C::kTK * C::kCPR);  // 0: K, 1: V (constant per u)
    const int rem = id % (C::kTK * C::kCPR);
    const int row = rem / C::kCPR;
    const int chunk = rem % C::kCPR;
    const int pos = p0 + row;
    const bool valid = pos < end;
    const T* base = which == 0 ? k : v;
    const T* src = base;
    if (valid) {
      const int64_t block = __ldg(table + (pos >> block_shift));
      src = base + block * block_stride + head_off + int64_t{pos & block_mask} * HD +
            chunk * C::kVec;
    }
    T* dst = stage + which * C::kTileElems + row * HD + C::Swizzle(row, chunk) * C::kVec;
    CpAsync16(dst, src, valid);
  }
}

// Attends the thread's rows to positions [begin, end) of (sequence s, KV
// head kvh), each row to those in its [first, limit], then merges the states
// of all lane groups and warps. On return the lanes with token group 0 (warps
// tw == 0, lanes tl == 0) hold the final state of their rows. Every thread of
// the CTA must call it.
template <typename T, int HD, int HPT>
__device__ __forceinline__ void AttendSimt(SimtRows<T, HD, HPT>& r, const AttnParams& p,
                                           int s, int kvh, int begin, int end, int head_warps,
                                           unsigned char* smem_raw) {
  using C = Cfg<T, HD>;
  T* smem = reinterpret_cast<T*>(smem_raw);
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int dx = lane % C::kDX;
  const int tl = lane / C::kDX;
  const int token_warps = kWarps / head_warps;
  const int tw = warp / head_warps;
  const int n = C::kNMax / token_warps;     // keys per lane group per tile
  const int stride = token_warps * C::kLPW;  // between a lane group's keys
  const int tg = tw * C::kLPW + tl;          // first key of the lane group

  const int32_t* table = p.block_tables + int64_t{s} * p.max_blocks_per_seq;
  const int64_t block_stride = int64_t{p.num_kv_heads} * (HD << p.block_shift);
  const int64_t head_off = int64_t{kvh} * (HD << p.block_shift);
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);

  const int ntiles = (end - begin + C::kTK - 1) / C::kTK;
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < ntiles) {
      LoadTile<T, HD>(smem + st * 2 * C::kTileElems, k, v, table, block_stride, head_off,
                      p.block_shift, begin + st * C::kTK, end, tid);
    }
    CpAsyncCommit();
  }

  for (int i = 0; i < ntiles; ++i) {
    CpAsyncWait<kStages - 2>();  // tile i landed (this thread's copies)...
    __syncthreads();             // ...everyone's; and tile i-1's stage is free
    const int next = i + kStages - 1;
    if (next < ntiles) {
      LoadTile<T, HD>(smem + (next % kStages) * 2 * C::kTileElems, k, v, table, block_stride,
                      head_off, p.block_shift, begin + next * C::kTK, end, tid);
    }
    CpAsyncCommit();

    const T* ks = smem + (i % kStages) * 2 * C::kTileElems;
    const T* vs = ks + C::kTileElems;
    const int p0 = begin + i * C::kTK;

    // Scores of this lane group's keys (base-2 logits; masked -> -inf).
    float sc[HPT][C::kNMax];
#pragma unroll
    for (int j = 0; j < C::kNMax; ++j) {
#pragma unroll
      for (int h = 0; h < HPT; ++h) sc[h][j] = NegInf();
      if (j < n) {  // uniform across the CTA
        const int t = tg + j * stride;
        float kx[C::kDT];
#pragma unroll
        for (int c = 0; c < C::kCPL; ++c) {
          const uint4 u = *reinterpret_cast<const uint4*>(
              ks + t * HD + C::Swizzle(t, c * C::kDX + dx) * C::kVec);
          Widen(u, kx + c * C::kVec, T{});
        }
        const int pos = p0 + t;
#pragma unroll
        for (int h = 0; h < HPT; ++h) {
          float d = 0.0f;
#pragma unroll
          for (int e = 0; e < C::kDT; ++e) d = fmaf(r.q[h][e], kx[e], d);
#pragma unroll
          for (int off = C::kDX / 2; off > 0; off >>= 1) d += __shfl_xor_sync(0xffffffffu, d, off);
          if (pos < end && pos <= r.limit[h] && pos >= r.first[h]) sc[h][j] = d;
        }
      }
    }

    // Online softmax: rescale only when the running max grows.
    float m_use[HPT];
#pragma unroll
    for (int h = 0; h < HPT; ++h) {
      float mt = sc[h][0];
#pragma unroll
      for (int j = 1; j < C::kNMax; ++j) mt = fmaxf(mt, sc[h][j]);
      if (mt > r.m[h]) {
        const float a = exp2f(r.m[h] - mt);  // 0 when m was -inf
        r.l[h] *= a;
#pragma unroll
        for (int e = 0; e < C::kDT; ++e) r.acc[h][e] *= a;
        r.m[h] = mt;
      }
      m_use[h] = r.m[h] == NegInf() ? 0.0f : r.m[h];  // keeps exp2(-inf - -inf) away
    }

    // acc += p * V over the same keys.
#pragma unroll
    for (int j = 0; j < C::kNMax; ++j) {
      if (j < n) {
        const int t = tg + j * stride;
        float vx[C::kDT];
#pragma unroll
        for (int c = 0; c < C::kCPL; ++c) {
          const uint4 u = *reinterpret_cast<const uint4*>(
              vs + t * HD + C::Swizzle(t, c * C::kDX + dx) * C::kVec);
          Widen(u, vx + c * C::kVec, T{});
        }
#pragma unroll
        for (int h = 0; h < HPT; ++h) {
          const float pr = exp2f(sc[h][j] - m_use[h]);
          r.l[h] += pr;
#pragma unroll
          for (int e = 0; e < C::kDT; ++e) r.acc[h][e] = fmaf(pr, vx[e], r.acc[h][e]);
        }
      }
    }
  }
  CpAsyncWait<0>();
  __syncthreads();  // shared memory is reused below

  // Merge lane groups of a warp (same dims, different keys).
#pragma unroll
  for (int off = C::kDX; off < 32; off <<= 1) {
#pragma unroll
    for (int h = 0; h < HPT; ++h) {
      const float mo = __shfl_xor_sync(0xffffffffu, r.m[h], off);
      const float lo = __shfl_xor_sync(0xffffffffu, r.l[h], off);
      float ao[C::kDT];
#pragma unroll
      for (int e = 0; e < C::kDT; ++e) ao[e] = __shfl_xor_sync(0xffffffffu, r.acc[h][e], off);
      r.Merge(h, mo, lo, ao);
    }
  }
  // Merge token warps through shared memory: [warp][h][m, l, acc[HD]].
  if (token_warps > 1) {
    float* buf = reinterpret_cast<float*>(smem_raw);
    constexpr int kSlot = HD + 2;
    if (tw > 0 && tl == 0) {
#pragma unroll
      for (int h = 0; h < HPT; ++h) {
        float* slot = buf + (warp * HPT + h) * kSlot;
        if (dx == 0) {
          slot[0] = r.m[h];
          slot[1] = r.l[h];
        }
#pragma unroll
        for (int e = 0; e < C::kDT; ++e) slot[2 + SimtRows<T, HD, HPT>::Dim(dx, e)] = r.acc[h][e];
      }
    }
    __syncthreads();
    if (tw == 0) {
      for (int o = 1; o < token_warps; ++o) {
        const int src_warp = warp + o * head_warps;
#pragma unroll
        for (int h = 0; h < HPT; ++h) {
          const float* slot = buf + (src_warp * HPT + h) * kSlot;
          float ao[C::kDT];
#pragma unroll
          for (int e = 0; e < C::kDT; ++e) ao[e] = slot[2 + SimtRows<T, HD, HPT>::Dim(dx, e)];
          r.Merge(h, slot[0], slot[1], ao);
        }
      }
    }
  }
}

// Writes acc / l (0 for a row that saw nothing) of row h to out.
template <typename T, int HD, int HPT>
__device__ __forceinline__ void StoreRow(const SimtRows<T, HD, HPT>& r, int h, int dx,
                                         float* __restrict__ dst) {
  const float inv = r.l[h] > 0.0f ? 1.0f / r.l[h] : 0.0f;
#pragma unroll
  for (int i = 0; i < Cfg<T, HD>::kDT; i += 4) {
    *reinterpret_cast<float4*>(dst + SimtRows<T, HD, HPT>::Dim(dx, i)) =
        make_float4(r.acc[h][i] * inv, r.acc[h][i + 1] * inv, r.acc[h][i + 2] * inv,
                    r.acc[h][i + 3] * inv);
  }
}

// Decode. grid = (num_kv_heads * row_chunks, num_seqs, max_parts).
template <typename T, int HD, int HPT>
__global__ void __launch_bounds__(kThreads, MinCtasPerSm(HPT)) SimtDecodeKernel(const AttnParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  using C = Cfg<T, HD>;
  const int s = blockIdx.y;
  const int kvh = blockIdx.x / p.row_chunks;
  const int chunk = blockIdx.x % p.row_chunks;
  const int part = blockIdx.z;
  const int len = p.context_lens[s];
  const DecodeSlice slice = SliceOf(p, len, part);
  if (part >= slice.parts) return;  // whole CTA: before any barrier
  const int begin = slice.begin;
  const int end = slice.end;
  const int parts = slice.parts;

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int dx = lane % C::kDX;
  const int hw = warp % p.head_warps;
  const int first = chunk * p.rows_per_cta;  // first row (head in group) of the CTA
  const int nrows = min(p.rows_per_cta, p.group - first);
  SimtRows<T, HD, HPT> r;
#pragma unroll
  for (int h = 0; h < HPT; ++h) {
    const int lr = hw + h * p.head_warps;
    const int head = kvh * p.group + first + lr;
    r.first[h] = slice.visible;
    r.limit[h] = lr < nrows ? len - 1 : -1;
    r.q_off[h] = (int64_t{s} * p.num_heads + (lr < nrows ? head : 0)) * HD;
  }
  r.LoadQuery(p.q, p.scale_log2, dx);
  AttendSimt<T, HD, HPT>(r, p, s, kvh, begin, end, p.head_warps, smem);

  if (warp >= p.head_warps || lane >= C::kDX) return;  // token group 0 holds the result
#pragma unroll
  for (int h = 0; h < HPT; ++h) {
    if (hw + h * p.head_warps >= nrows) continue;  // padding row (limit is -1 for len 0 too)
    if (parts == 1) {
      StoreRow(r, h, dx, p.out + r.q_off[h]);
      continue;
    }
    const int64_t prow = (r.q_off[h] / HD) * p.max_parts + part;  // (s, head, part)
    if (dx == 0) {
      p.part_max[prow] = r.m[h];
      p.part_sum[prow] = r.l[h];
    }
    float* dst = p.part_acc + prow * HD;
#pragma unroll
    for (int i = 0; i < C::kDT; i += 4) {
      *reinterpret_cast<float4*>(dst + SimtRows<T, HD, HPT>::Dim(dx, i)) =
          make_float4(r.acc[h][i], r.acc[h][i + 1], r.acc[h][i + 2], r.acc[h][i + 3]);
    }
  }
}

// Merges the slices of a partitioned decode: out = sum_p acc_p 2^(m_p - M) /
// sum_p l_p 2^(m_p - M). grid = (num_heads, num_seqs), one thread per dim.
// Sequences of one slice were written directly by the decode kernel.
__global__ void DecodeReduceKernel(const AttnParams p, int head_dim) {
  const int h = blockIdx.x;
  const int s = blockIdx.y;
  const int parts = SliceOf(p, p.context_lens[s], 0).parts;
  if (parts <= 1) return;
  const int64_t row = int64_t{s} * p.num_heads + h;
  const float* mx = p.part_max + row * p.max_parts;
  const float* sum = p.part_sum + row * p.max_parts;
  float m_all = NegInf();
  for (int i = 0; i < parts; ++i) m_all = fmaxf(m_all, mx[i]);
  float total = 0.0f;
  for (int i = 0; i < parts; ++i) total += sum[i] * exp2f(mx[i] - m_all);
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float o = 0.0f;
    for (int i = 0; i < parts; ++i) {
      o += p.part_acc[(row * p.max_parts + i) * head_dim + d] * exp2f(mx[i] - m_all);
    }
    p.out[row * head_dim + d] = o * inv;
  }
}

// Prefill of fp32 caches. grid = (row tiles of 8, num_seqs, num_kv_heads);
// a tile is 8 consecutive flat rows (token i, head j) -> i * group + j of
// the sequence's query tokens for this KV head.
template <int HD>
__global__ void __launch_bounds__(kThreads, MinCtasPerSm(2)) SimtPrefillKernel(const AttnParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int HPT = 2;  // with head_warps == 4: 8 rows per CTA
  using C = Cfg<float, HD>;
  const int s = blockIdx.y;
  const int kvh = blockIdx.z;
  const int qs = p.query_start[s];
  const int qlen = p.query_start[s + 1] - qs;
  const int len = p.context_lens[s];
  const int past = len - qlen;
  const int rows_total = qlen * p.group;
  const int r0 = blockIdx.x * p.rows_per_cta;
  if (r0 >= rows_total) return;
  const int nrows = min(p.rows_per_cta, rows_total - r0);
  const int end = past + (r0 + nrows - 1) / p.group + 1;  // keys of the last row
  const int begin = WindowStart(past + r0 / p.group, p.sliding_window);  // of the first row

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int dx = lane % C::kDX;
  const int hw = warp % p.head_warps;
  SimtRows<float, HD, HPT> r;
#pragma unroll
  for (int h = 0; h < HPT; ++h) {
    const int lr = hw + h * p.head_warps;
    const int row = r0 + lr;
    const int i = row / p.group;
    const int j = row % p.group;
    r.limit[h] = lr < nrows ? past + i : -1;
    r.first[h] = WindowStart(past + i, p.sliding_window);
    r.q_off[h] = lr < nrows ? ((int64_t{qs} + i) * p.num_heads + kvh * p.group + j) * HD : 0;
  }
  r.LoadQuery(p.q, p.scale_log2, dx);
  AttendSimt<float, HD, HPT>(r, p, s, kvh, begin, end, p.head_warps, smem);

  if (warp >= p.head_warps || lane >= C::kDX) return;
#pragma unroll
  for (int h = 0; h < HPT; ++h) {
    if (r.limit[h] >= 0) StoreRow(r, h, dx, p.out + r.q_off[h]);
  }
}

}  // namespace

cudaError_t LaunchSimtDecode(const AttnParams& p, CacheDtype dtype, int32_t head_dim,
                             int32_t heads_per_thread, int32_t num_seqs, cudaStream_t stream) {
  return DispatchCacheShape<true>(dtype, head_dim, [&](auto type, auto dim) {
    using T = typename decltype(type)::type;
    constexpr int HD = decltype(dim)::value;
    const dim3 grid(static_cast<unsigned>(p.num_kv_heads * p.row_chunks),
                    static_cast<unsigned>(num_seqs), static_cast<unsigned>(p.max_parts));
    constexpr int kBytes = Cfg<T, HD>::kSmemBytes;
    if (heads_per_thread == 1) {
      SimtDecodeKernel<T, HD, 1><<<grid, kThreads, kBytes, stream>>>(p);
    } else if (heads_per_thread == 2) {
      SimtDecodeKernel<T, HD, 2><<<grid, kThreads, kBytes, stream>>>(p);
    } else {
      return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
  });
}

cudaError_t LaunchDecodeReduce(const AttnParams& p, int32_t head_dim, int32_t num_seqs,
                               cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.num_heads), static_cast<unsigned>(num_seqs));
  DecodeReduceKernel<<<grid, static_cast<unsigned>(head_dim), 0, stream>>>(p, head_dim);
  return cudaGetLastError();
}

cudaError_t LaunchSimtPrefill(const AttnParams& p, int32_t head_dim, int32_t num_seqs,
                              int32_t max_query_len, cudaStream_t stream) {
  return DispatchHeadDim(head_dim, [&](auto dim) {
    constexpr int HD = decltype(dim)::value;
    const int64_t rows = int64_t{max_query_len} * p.group;
    const dim3 grid(static_cast<unsigned>((rows + p.rows_per_cta - 1) / p.rows_per_cta),
                    static_cast<unsigned>(num_seqs), static_cast<unsigned>(p.num_kv_heads));
    SimtPrefillKernel<HD><<<grid, kThreads, Cfg<float, HD>::kSmemBytes, stream>>>(p);
    return cudaGetLastError();
  });
}

}  // namespace folio::kernels::gpu::internal
