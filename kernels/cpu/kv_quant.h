// The 8-bit codes of a quantized KV cache (kernels/cache_layout.h): int8
// (symmetric, [-127, 127]) and fp8 e4m3 (OCP "e4m3fn": 4 exponent bits with
// bias 7, 3 mantissa bits, no infinities, largest finite 448), each times its
// block's per-KV-head scale. Written by hand: no Debian library converts fp8
// on the CPU, and the decoders must inline into the attention kernels' SIMD
// loops (plain integer and float operations that vectorize).
#ifndef FOLIO_KERNELS_CPU_KV_QUANT_H_
#define FOLIO_KERNELS_CPU_KV_QUANT_H_

#include <bit>
#include <cmath>
#include <cstdint>

namespace folio::kernels::cpu {

// An fp8 e4m3 code. A distinct type, so that overloads on the element type
// (float, int8_t, Fp8E4m3) pick the right decoder.
struct Fp8E4m3 {
  uint8_t bits;
};

// Code -> value. fp8: the e4m3 exponent and mantissa bits moved into an
// fp32's and its exponent rebiased (+120) give every normal code; a code
// with a zero exponent field (subnormal, or zero) is its mantissa times
// 2^-9. Both computed and one picked with a bit mask: no branch and no fp32
// subnormal (which would make the multiplies slow), so GCC vectorizes it.
// 0x7f (NaN) is never written; it would read as 480.
inline __attribute__((always_inline)) float DecodeKv(float v) { return v; }
inline __attribute__((always_inline)) float DecodeKv(int8_t c) { return static_cast<float>(c); }
inline __attribute__((always_inline)) float DecodeKv(Fp8E4m3 c) {
  const uint32_t magnitude = c.bits & 0x7fu;
  const uint32_t normal = (magnitude << 20) + (120u << 23);
  const uint32_t subnormal =
      std::bit_cast<uint32_t>(static_cast<float>(static_cast<int32_t>(magnitude)) * 0x1p-9f);
  const uint32_t is_subnormal = 0u - static_cast<uint32_t>(magnitude < 8);
  const uint32_t bits = (subnormal & is_subnormal) | (normal & ~is_subnormal);
  return std::bit_cast<float>(bits | ((c.bits & 0x80u) << 24));
}

// x rounded to the nearest integer, ties to even, for |x| <= 2^22: adding
// and taking away 1.5 * 2^23 leaves no fraction bits in between. No libm
// call (SSE2, the baseline, has no rounding instruction) and no branch, so
// the cache writes' loops vectorize.
inline __attribute__((always_inline)) float RoundToEven(float x) {
  constexpr float kMagic = 12582912.0f;
  return (x + kMagic) - kMagic;
}

// Value (already divided by the scale) -> nearest code, ties to even,
// saturating at the largest finite code (NaN too).
inline __attribute__((always_inline)) int8_t EncodeInt8(float x) {
  const float clamped = x > -127.0f ? (x < 127.0f ? x : 127.0f) : -127.0f;
  return static_cast<int8_t>(RoundToEven(clamped));
}

inline __attribute__((always_inline)) Fp8E4m3 EncodeFp8E4m3(float x) {
  const uint32_t sign = (std::bit_cast<uint32_t>(x) >> 24) & 0x80u;
  float a = std::fabs(x);
  a = a < 448.0f ? a : 448.0f;
  // Subnormal range: multiples of 2^-9 (8 of them is 2^-6, the smallest normal).
  const uint32_t subnormal = static_cast<uint32_t>(static_cast<int32_t>(RoundToEven(a * 512.0f)));
  // Normal: round the fp32 mantissa to 3 bits, ties to even (a carry moves
  // into the exponent as it should), then rebias the exponent (127 -> 7).
  uint32_t u = std::bit_cast<uint32_t>(a);
  u += 0x7ffffu + ((u >> 20) & 1u);
  const uint32_t normal = ((u >> 20) & 0x7ffu) - (120u << 3);
  return {static_cast<uint8_t>(sign | (a < 0x1p-6f ? subnormal : normal))};
}

// EncodeKv<Code>: the encoder of a code type, for templates over it.
template <class Code>
Code EncodeKv(float x);
template <>
inline int8_t EncodeKv<int8_t>(float x) { return EncodeInt8(x); }
template <>
inline Fp8E4m3 EncodeKv<Fp8E4m3>(float x) { return EncodeFp8E4m3(x); }

}  // namespace folio::kernels::cpu

#endif  // FOLIO_KERNELS_CPU_KV_QUANT_H_
