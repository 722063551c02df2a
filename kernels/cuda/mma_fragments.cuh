// Internal to kernels/cuda/attention_mma*.cu: the warp-level tensor-core
// pieces (mma.sync.m16n8k16 with fp32 accumulation, ldmatrix, 16-bit packing)
// that the paged prefill and the GQA decode share. sm_80 and later.
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
__device__ __forceinline__ void Mma(float* c, const uint32_t* a, uint32_t b0, uint32_t b1,
                                    __half) {
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

// Issues the cp.async copies of K/V positions [p0, p0 + kKeys) of one KV
// head into two tiles of rows kStride elements apart (K to k_dst, V to
// v_dst); positions >= end are zero-filled without reading the table or
// the cache. All kThreads threads of the CTA call it.
template <typename T, int HD, int kKeys, int kStride, int kThreads>
__device__ __forceinline__ void LoadKvRows(T* k_dst, T* v_dst, const AttnParams& p,
                                           const int32_t* table, int64_t head_off, int p0,
                                           int end, int tid) {
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
      off = int64_t{__ldg(table + (pos >> p.block_shift))} * block_stride + head_off +
            int64_t{pos & block_mask} * HD + chunk * 8;
    }
    const int dst = row * kStride + chunk * 8;
    CpAsync16(k_dst + dst, static_cast<const T*>(p.k) + off, valid);
    CpAsync16(v_dst + dst, static_cast<const T*>(p.v) + off, valid);
  }
}

// Kernels above 48 KiB of dynamic shared memory need a per-device opt-in;
// done once per (kernel, device) and remembered in `done`, a bit per device.
inline cudaError_t OptInDynamicSmem(const void* kernel, int bytes, std::atomic<uint64_t>* done) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
  if (bit != 0 && (done->load(std::memory_order_acquire) & bit) != 0) return cudaSuccess;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err == cudaSuccess) done->fetch_or(bit, std::memory_order_acq_rel);
  return err;
}

}  // namespace folio::kernels::gpu::internal

#endif  // FOLIO_KERNELS_CUDA_MMA_FRAGMENTS_CUH_
