#ifndef FOLIO_COMMON_DTYPE_H_
#define FOLIO_COMMON_DTYPE_H_

// Element types of model weights, and scalar conversions between them and
// float32. Header-only and dependency-free (kernels-only builds use it too).
//
// Conversions to the 16-bit formats round to nearest, ties to even, like
// torch's `.to(torch.bfloat16)` / `.half()`: a value exactly halfway between
// two representable neighbours goes to the one with an even mantissa. NaN
// stays NaN (quiet, sign kept), infinities stay infinities, finite values too
// large for the format become infinity, and fp16 keeps its subnormals.

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace folio {

enum class DType : uint8_t { kF32, kF16, kBF16 };

// Bytes per element.
inline size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
  }
  return 0;
}

// The safetensors spelling: "F32", "F16", "BF16".
inline const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
  }
  return "?";
}

namespace dtype_internal {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

}  // namespace dtype_internal

// bfloat16 is the top half of a float32: widening is exact.
inline float Bf16ToFloat(uint16_t h) {
  return dtype_internal::BitsFloat(static_cast<uint32_t>(h) << 16);
}

inline uint16_t FloatToBf16(float f) {
  uint32_t u = dtype_internal::FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep sign, force quiet bit
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  }
  // Round to nearest even on the 16 dropped bits; a carry into the exponent
  // is correct (it may produce infinity, which is the right answer).
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return static_cast<uint16_t>(u >> 16);
}

// IEEE 754 binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
inline float Fp16ToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) {  // Inf / NaN (payload kept)
    return dtype_internal::BitsFloat(sign | 0x7f800000u | (mant << 13));
  }
  if (exp == 0) {
    if (mant == 0) return dtype_internal::BitsFloat(sign);  // +-0
    // Subnormal: mant * 2^-24. Normalize into a float32 normal.
    uint32_t e = 113;  // float32 biased exponent of 2^-14
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    mant &= 0x3ffu;
    return dtype_internal::BitsFloat(sign | (e << 23) | (mant << 13));
  }
  return dtype_internal::BitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline uint16_t FloatToFp16(float f) {
  uint32_t u = dtype_internal::FloatBits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) {
    if (a > 0x7f800000u) {  // NaN: quiet, keep the top payload bits
      return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    }
    return static_cast<uint16_t>(sign | 0x7c00u);  // Inf
  }
  // 65520 = halfway between 65504 (largest finite, odd mantissa) and 2^16:
  // ties to even rounds it, and everything above, to infinity.
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (a < 0x38800000u) {
    // Below 2^-14: an fp16 subnormal (or zero), q = round(|f| * 2^24).
    uint32_t e = a >> 23;
    uint32_t shift = 126u - e;  // >= 14
    if (shift > 24u) return sign;  // |f| < 2^-25 rounds to zero
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;  // may reach 0x400: smallest normal
    return static_cast<uint16_t>(sign | q);
  }
  // Normal: rebias the exponent (127 -> 15) and round off 13 mantissa bits;
  // a mantissa carry into the exponent is correct.
  uint32_t b = a - (112u << 23);
  uint32_t q = b >> 13;
  uint32_t rem = b & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

}  // namespace folio

#endif  // FOLIO_COMMON_DTYPE_H_
