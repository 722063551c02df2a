// Internal to kernels/cuda/attention_mma*.cu: the warp-level tensor-core
// pieces (mma.sync.m16n8k16 with fp32 accumulation, ldmatrix, 16-bit packing,
// one warp's attention over a K/V tile, the K/V tile loader) that the paged
// prefill and the GQA decode share. sm_80 and later.
#ifndef FOLIO_KERNELS_CUDA_MMA_FRAGMENTS_CUH_
#define FOLIO_KERNELS_CUDA_MMA_FRAGMENTS_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "kernels/cuda/attention_internal.cuh"

namespace folio::kernels::gpu::internal {

// Elements per shared-memory row of a Q or K/V tile of head_dim HD (16-bit):
// padded by 16 bytes, which makes the 32-bit fragment loads of Q and K and
// the ldmatrix rows of V conflict-free, and keeps rows 16-byte aligned for
// cp.async.
template <int HD>
inline constexpr int kPaddedRow = HD + 8;
static_assert(kPaddedRow<64> * 2 % 16 == 0);

// Where element (row, col) of a K/V tile lives in shared memory, for
// WarpRows::Attend and LoadKvRows; col is even (32-bit fragment loads) or a
// multiple of 8 (16-byte copies and ldmatrix rows).
// Rows kStride elements apart (kPaddedRow): what the prefill uses.
template <int kStride>
struct PaddedRows {
  static constexpr int kRowElems = kStride;
  __device__ __forceinline__ static int Off(int row, int col) { return row * kStride + col; }
};
// Unpadded rows of HD elements whose 16-byte chunks are XOR-swizzled by
// row % 8: as conflict-free for the fragment loads as the padding, and every
// row stays 128-byte aligned. cp.async into padded rows, which straddle
// 128-byte lines, made the decode fetch about 1.5 sectors from L2 for every
// sector of K/V (Nsight Compute: 33% excess sectors, L2 hit rate 34%); the
// decode uses this layout. The compute-bound prefill keeps PaddedRows: the
// XOR in every fragment address cost it more than the copies gained.
template <int HD>
struct SwizzledRows {
  static_assert(HD % 64 == 0, "8 chunks of 16 bytes per row at least");
  static constexpr int kRowElems = HD;
  __device__ __forceinline__ static int Off(int row, int col) {
    return row * HD + (((col >> 3) ^ (row & 7)) << 3) + (col & 7);
  }
};

// Two floats -> one register of two 16-bit values, lo in the low half.
__device__ __forceinline__ uint32_t Pack(float lo, float hi, __nv_bfloat16) {
  const __nv_bfloat162 x = __floats2bfloat162_rn(lo, hi);
  uint32_t u;
  memcpy(&u, &x, sizeof(u));
  return u;
}
__device__ __forceinline__ uint32_t Pack(float lo, float hi, __half) {
  const __half2 x = __floats2half2_rn(lo, hi);
  uint32_t u;
  memcpy(&u, &x, sizeof(u));
  return u;
}

// c += a * b for one m16n8k16 tile.
__device__ __forceinline__ void Mma(float* c, const uint32_t* a, uint32_t b0, uint32_t b1,
                                    __nv_bfloat16) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void Mma(float* c, const uint32_t* a, uint32_t b0, uint32_t b1, __half) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8x8 16-bit matrices, transposed: lanes 8i..8i+7 give the row
// addresses of matrix i; register i receives matrix i in the B-fragment
// layout (element (2t, g) and (2t + 1, g) of the stored matrix).
__device__ __forceinline__ void LdMatrixX4Trans(const void* row_addr, uint32_t* r) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row_addr));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

__device__ __forceinline__ uint32_t Lds32(const void* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

__device__ __forceinline__ float NegInf() { return __int_as_float(0xff800000); }

// One warp's 16 query rows of a FlashAttention-2 pass over K/V tiles in shared
// memory, with fp32 accumulation and a base-2 softmax (q carries scale *
// log2 e). Lane (g = lane / 4, t = lane % 4) holds rows g and g + 8 in the mma
// C layout: o[nt][0..1] are row g, dims nt * 8 + 2t + {0, 1}; o[nt][2..3] row
// g + 8. The prefill and the decode kernels differ only in which rows and
// positions a warp takes and which positions it masks.
template <typename T, int HD>
struct WarpRows {
  float o[HD / 8][4];
  float m[2];  // running max of rows g, g + 8; -inf before any position
  float l[2];  // running sum over this lane's columns; FinishSums adds the quad's

  __device__ __forceinline__ void Init() {
#pragma unroll
    for (int nt = 0; nt < HD / 8; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
    m[0] = m[1] = NegInf();
    l[0] = l[1] = 0.0f;
  }

  // Attends kN positions (a multiple of 16): their K rows at ks and V rows at
  // vs, both tiles laid out as Layout (PaddedRows, SwizzledRows); the A
  // fragments of Q at qw (the q tile, rows kQStride elements apart, + g *
  // kQStride + 2t). masked(col, r) drops position col of the tile for row g
  // (r = 0) or g + 8 (r = 1); a dropped position's K may be anything finite.
  template <int kN, int kQStride, class Layout, class Masked>
  __device__ __forceinline__ void Attend(const T* qw, const T* ks, const T* vs, int lane,
                                         Masked masked) {
    static_assert(kN % 16 == 0);
    const int g = lane >> 2;
    const int t = lane & 3;
    // S = Q K^T: 16 rows x kN positions.
    float s[kN / 8][4];
#pragma unroll
    for (int nt = 0; nt < kN / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      uint32_t a[4];
      a[0] = Lds32(qw + kk * 16);
      a[1] = Lds32(qw + 8 * kQStride + kk * 16);
      a[2] = Lds32(qw + kk * 16 + 8);
      a[3] = Lds32(qw + 8 * kQStride + kk * 16 + 8);
#pragma unroll
      for (int nt = 0; nt < kN / 8; ++nt) {
        const int row = nt * 8 + g;
        Mma(s[nt], a, Lds32(ks + Layout::Off(row, kk * 16 + 2 * t)),
            Lds32(ks + Layout::Off(row, kk * 16 + 8 + 2 * t)), T{});
      }
    }

    // Mask, then the online-softmax update.
    float mx[2] = {NegInf(), NegInf()};
#pragma unroll
    for (int nt = 0; nt < kN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (masked(nt * 8 + 2 * t + (e & 1), e >> 1)) s[nt][e] = NegInf();
        mx[e >> 1] = fmaxf(mx[e >> 1], s[nt][e]);
      }
    }
    float m_use[2], alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float m_new = fmaxf(m[r], mx[r]);
      m_use[r] = m_new == NegInf() ? 0.0f : m_new;  // a row with nothing yet
      alpha[r] = exp2f(m[r] - m_use[r]);            // 0 when m was -inf
      m[r] = m_new;
      l[r] *= alpha[r];
    }
    // Once the running maxima settle alpha is exactly 1: skip the rescale.
    if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
      for (int nt = 0; nt < HD / 8; ++nt) {
        o[nt][0] *= alpha[0];
        o[nt][1] *= alpha[0];
        o[nt][2] *= alpha[1];
        o[nt][3] *= alpha[1];
      }
    }
#pragma unroll
    for (int nt = 0; nt < kN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[nt][e] = exp2f(s[nt][e] - m_use[e >> 1]);
        l[e >> 1] += s[nt][e];
      }
    }

    // O += P V. The S accumulators of position tiles 2kk, 2kk + 1 are
    // exactly the A fragment of the k16 step kk.
#pragma unroll
    for (int kk = 0; kk < kN / 16; ++kk) {
      uint32_t a[4];
      a[0] = Pack(s[2 * kk][0], s[2 * kk][1], T{});
      a[1] = Pack(s[2 * kk][2], s[2 * kk][3], T{});
      a[2] = Pack(s[2 * kk + 1][0], s[2 * kk + 1][1], T{});
      a[3] = Pack(s[2 * kk + 1][2], s[2 * kk + 1][3], T{});
      // Matrix i of the ldmatrix: positions kk*16 + (i & 1) * 8 + row, dims
      // +(i >> 1) * 8.
      const int mi = lane >> 3;
      const int vrow = kk * 16 + (mi & 1) * 8 + (lane & 7);
#pragma unroll
      for (int nt2 = 0; nt2 < HD / 16; ++nt2) {
        uint32_t b[4];
        LdMatrixX4Trans(vs + Layout::Off(vrow, nt2 * 16 + (mi >> 1) * 8), b);
        Mma(o[2 * nt2], a, b[0], b[1], T{});
        Mma(o[2 * nt2 + 1], a, b[2], b[3], T{});
      }
    }
  }

  // After the last Attend: l becomes each row's whole sum in every lane.
  __device__ __forceinline__ void FinishSums() {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    }
  }
};

// Issues the cp.async copies of K/V positions [p0, p0 + kKeys) of one KV
// head into two tiles laid out as Layout (K to k_dst, V to v_dst); positions >=
// end are zero-filled without looking up their block or reading the cache.
// block_of(pos) gives the cache block that holds position pos (the sequence's
// block-table entry pos >> block_shift). All kThreads threads of the CTA call
// it.
template <typename T, int HD, int kKeys, class Layout, int kThreads, class BlockOf>
__device__ __forceinline__ void LoadKvRows(T* k_dst, T* v_dst, const AttnParams& p,
                                           BlockOf block_of, int64_t head_off, int p0, int end,
                                           int tid) {
  constexpr int kChunksPerRow = HD * static_cast<int>(sizeof(T)) / 16;
  static_assert((kKeys * kChunksPerRow) % kThreads == 0);
  const int64_t block_stride = int64_t{p.num_kv_heads} * (HD << p.block_shift);
  const int block_mask = (1 << p.block_shift) - 1;
#pragma unroll
  for (int u = 0; u < kKeys * kChunksPerRow / kThreads; ++u) {
    const int id = tid + u * kThreads;
    const int row = id / kChunksPerRow;
    const int chunk = id % kChunksPerRow;
    const int pos = p0 + row;
    const bool valid = pos < end;
    int64_t off = 0;
    if (valid) {
      off = int64_t{block_of(pos)} * block_stride + head_off + int64_t{pos & block_mask} * HD +
            chunk * 8;
    }
    const int dst = Layout::Off(row, chunk * 8);
    CpAsync16(k_dst + dst, static_cast<const T*>(p.k) + off, valid);
    CpAsync16(v_dst + dst, static_cast<const T*>(p.v) + off, valid);
  }
}

// Kernels above 48 KiB of dynamic shared memory need a per-device opt-in
// before their first launch; done once per (kernel, device) and remembered
// in a bit per device.
template <auto kKernel, int kBytes>
cudaError_t EnsureDynamicSmem() {
  if constexpr (kBytes <= 48 * 1024) {
    return cudaSuccess;
  } else {
    static std::atomic<uint64_t> done{0};
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return err;
    const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
    if (bit != 0 && (done.load(std::memory_order_acquire) & bit) != 0) return cudaSuccess;
    err = cudaFuncSetAttribute(reinterpret_cast<const void*>(kKernel),
                               cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
    if (err == cudaSuccess) done.fetch_or(bit, std::memory_order_acq_rel);
    return err;
  }
}

// How many CTAs of kKernel (kThreads threads, kBytes of dynamic shared
// memory) fit on one SM of the current device; asked once per (kernel,
// device) and remembered. Call after EnsureDynamicSmem.
template <auto kKernel, int kThreads, int kBytes>
cudaError_t ResidentCtasPerSm(int* per_sm) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices] = {};
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  const bool cached = device >= 0 && device < kMaxDevices;
  if (cached && (*per_sm = cache[device].load(std::memory_order_relaxed)) > 0) return cudaSuccess;
  err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, kKernel, kThreads, kBytes);
  if (err != cudaSuccess) return err;
  if (cached && *per_sm > 0) cache[device].store(*per_sm, std::memory_order_relaxed);
  return cudaSuccess;
}

}  // namespace folio::kernels::gpu::internal

#endif  // FOLIO_KERNELS_CUDA_MMA_FRAGMENTS_CUH_
