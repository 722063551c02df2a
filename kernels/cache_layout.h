// KV cache layout and the index math shared by the CPU and CUDA kernels.
//
// Layout (fixed; the cache engine, the kernels and the scheduler's block ids
// all assume it). Per layer there are two separate tensors, K and V, each
//
//     [num_blocks][num_kv_heads][block_size][head_dim]
//
// so one block of one layer is one contiguous run of
// num_kv_heads * block_size * head_dim elements (BlockElems) in K and another
// in V. Block-granular ops (copy, swap) therefore move bytes_per_block bytes
// per (layer, K|V) and never need to know the element type.
//
// A token's place in the cache is its slot: slot = block_id * block_size +
// offset_in_block. Slot kSkipSlot (-1) marks padding tokens that are not
// cached. Element types: fp32, fp16 or bf16 storage, or quantized 8-bit
// storage (int8 or fp8 e4m3) with scales (CacheDtype).
//
// Quantized blocks carry their own scales: one block of one layer's K (or V)
// is its BlockElems one-byte codes, [num_kv_heads][block_size][head_dim],
// then num_kv_heads fp32 scales (element = code * scale of its KV head in
// that block), padded to a multiple of 64 bytes (QuantizedBlockBytes). Swap,
// copy-on-write and prefix sharing move whole blocks, so the scales always
// travel with the codes they belong to.
//
// Everything here is constexpr and branch-free so that CPU and CUDA code run
// exactly the same arithmetic (TensorRT-LLM KVBlockArray style).
#ifndef FOLIO_KERNELS_CACHE_LAYOUT_H_
#define FOLIO_KERNELS_CACHE_LAYOUT_H_

#include <cstdint>

// Marks helpers callable from both host and device code; empty for plain C++.
#if defined(__CUDACC__)
#define FOLIO_HOST_DEVICE __host__ __device__
#else
#define FOLIO_HOST_DEVICE
#endif

namespace folio::kernels {

inline constexpr int64_t kSkipSlot = -1;

// Storage type of the cache elements.
enum class CacheDtype : int32_t {
  kFloat32 = 0,
  kFloat16 = 1,
  kBFloat16 = 2,
  kInt8 = 3,     // symmetric, code in [-127, 127]
  kFp8E4m3 = 4,  // OCP e4m3fn, finite range +-448
};

// The storage type's name as flags, reports and metrics spell it.
constexpr const char* CacheDtypeName(CacheDtype t) {
  switch (t) {
    case CacheDtype::kFloat32: return "float32";
    case CacheDtype::kFloat16: return "float16";
    case CacheDtype::kBFloat16: return "bfloat16";
    case CacheDtype::kInt8: return "int8";
    case CacheDtype::kFp8E4m3: return "fp8_e4m3";
  }
  return "unknown";
}

// Bytes of one element's code (the scales of quantized blocks not counted).
FOLIO_HOST_DEVICE constexpr int64_t CacheDtypeBytes(CacheDtype t) {
  return t == CacheDtype::kFloat32 ? 4 : (t == CacheDtype::kInt8 || t == CacheDtype::kFp8E4m3) ? 1 : 2;
}

FOLIO_HOST_DEVICE constexpr bool IsQuantized(CacheDtype t) {
  return t == CacheDtype::kInt8 || t == CacheDtype::kFp8E4m3;
}

// Largest code magnitude: a block's scale is its KV head's absolute maximum
// over this.
FOLIO_HOST_DEVICE constexpr float QuantizedMax(CacheDtype t) {
  return t == CacheDtype::kInt8 ? 127.0f : 448.0f;
}

// Shape of one cache block (of one layer, K or V).
struct CacheShape {
  int32_t num_kv_heads = 0;
  int32_t block_size = 0;  // tokens per block
  int32_t head_dim = 0;
};

// Elements in one block of one layer's K (or V) tensor.
FOLIO_HOST_DEVICE constexpr int64_t BlockElems(const CacheShape& s) {
  return int64_t{s.num_kv_heads} * s.block_size * s.head_dim;
}

// Elements of one token's K (or V): [num_kv_heads][head_dim].
FOLIO_HOST_DEVICE constexpr int64_t TokenElems(const CacheShape& s) {
  return int64_t{s.num_kv_heads} * s.head_dim;
}

// Bytes of one block of one layer's K (or V) in storage of type t: the
// elements, and for quantized types their per-KV-head scales, padded to 64.
FOLIO_HOST_DEVICE constexpr int64_t BlockBytes(const CacheShape& s, CacheDtype t) {
  if (!IsQuantized(t)) return BlockElems(s) * CacheDtypeBytes(t);
  return (BlockElems(s) + int64_t{4} * s.num_kv_heads + 63) / 64 * 64;
}

// Index of element (block, head, offset-in-block, d) in one layer's K or V.
FOLIO_HOST_DEVICE constexpr int64_t CacheIndex(const CacheShape& s, int64_t block,
                                               int64_t head, int64_t offset,
                                               int64_t d) {
  return ((block * s.num_kv_heads + head) * s.block_size + offset) * s.head_dim + d;
}

// Index in the cache of element i (= head * head_dim + d) of the token stored
// at `slot`. REQUIRES: slot >= 0, 0 <= i < TokenElems(s).
FOLIO_HOST_DEVICE constexpr int64_t SlotElemIndex(const CacheShape& s, int64_t slot,
                                                  int64_t i) {
  return CacheIndex(s, slot / s.block_size, i / s.head_dim, slot % s.block_size,
                    i % s.head_dim);
}

}  // namespace folio::kernels

#endif  // FOLIO_KERNELS_CACHE_LAYOUT_H_
