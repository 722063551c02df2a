// Small math helpers for the CPU kernels, written as branch-free scalar code
// so that `#pragma omp simd` loops calling them vectorize at -O2 with no
// -march and no -ffast-math (GCC's -O2 cost model leaves plain loops with
// float reductions or unknown trip counts scalar; the pragma forces them). Header-only so that they
// inline into the calling loop.
#ifndef FOLIO_KERNELS_CPU_VEC_MATH_H_
#define FOLIO_KERNELS_CPU_VEC_MATH_H_

#include <bit>
#include <cstdint>
#include <limits>

// Hot loops are compiled several times on x86-64 Linux with GCC: a baseline
// clone (SSE2, what the build targets), an x86-64-v3 clone (AVX2 + FMA: what
// every AVX2 CPU of the last decade has, Intel and AMD alike) and a plain
// AVX2 one (no FMA), one picked at load time (function multi-versioning
// through an ifunc). The source stays plain loops; no -march flag is needed
// and the binary still runs on any x86-64. (An "arch=haswell" clone is taken
// only on Intel CPUs of that family: AMD ones got the AVX2 clone, whose
// separate multiplies and adds cost the attention kernels 20-40%.)
// Mark a function FOLIO_SIMD_CLONES and its helpers FOLIO_ALWAYS_INLINE so
// that they are compiled into each clone. Define FOLIO_NO_SIMD_CLONES to
// build the baseline only.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(FOLIO_NO_SIMD_CLONES)
#define FOLIO_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "avx2", "default")))
#else
#define FOLIO_SIMD_CLONES
#endif
#if defined(__GNUC__)
#define FOLIO_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define FOLIO_ALWAYS_INLINE inline
#endif

namespace folio::kernels::cpu {

// c ? a : b through bit masks. GCC (with its default -ftrapping-math) will
// not if-convert a plain ?: whose arms are floating-point results, which
// stops the loop from vectorizing; the integer form always vectorizes.
FOLIO_ALWAYS_INLINE float Select(bool c, float a, float b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & m) | (std::bit_cast<uint32_t>(b) & ~m));
}

// exp(x) in fp32 without a libm call: Cephes-style range reduction
// x = n*ln2 + r, |r| <= ln2/2, a degree-6 polynomial for e^r and 2^n built in
// the exponent bits. Relative error within a few ulp of std::exp over the
// whole range. Inputs below -87.3 (including -inf) give exactly 0; inputs
// above 88 give exp(88) (no overflow to inf). NaN in, unspecified out.
FOLIO_ALWAYS_INLINE float FastExp(float x) {
  constexpr float kLo = -87.3f;  // exp(kLo) ~ 1.2e-38 = smallest normal range
  constexpr float kHi = 88.0f;   // 2^n stays finite
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // exact in 10 bits: n*kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to integer
  const float xc = Select(x > kHi, kHi, Select(x < kLo, kLo, x));
  // Round xc*log2(e) to the nearest integer without floor()/rint() (which
  // are library calls on plain SSE2); IEEE semantics keep (a + c) - c.
  const float fn = (xc * kLog2e + kRound) - kRound;
  const float r = (xc - fn * kLn2Hi) - fn * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * (r * r) + r + 1.0f;
  const int32_t n = static_cast<int32_t>(fn);  // in [-126, 127]
  const float scale = std::bit_cast<float>(static_cast<int32_t>((n + 127) << 23));
  return Select(x < kLo, 0.0f, er * scale);
}

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The largest of x[0..n), kNegInf when n = 0; NaN are skipped. Written as
// `x > m ? x : m` (one maxps lane-wise): GCC 12 leaves a
// `std::max(m, x[i])` reduction scalar, a chain of dependent vmaxss (40% of
// the decode softmax's time with an int8 cache).
FOLIO_ALWAYS_INLINE float MaxOf(const float* x, int64_t n) {
  float m = kNegInf;
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

}  // namespace folio::kernels::cpu

#endif  // FOLIO_KERNELS_CPU_VEC_MATH_H_
