// PRIVATE to the CPU attention kernels, through kernels/cpu/attention_internal.h
// (which says why everything here is inline, static or in an anonymous
// namespace); include it nowhere else.
#ifndef FOLIO_KERNELS_CPU_ATTENTION_ROWS4_H_
#define FOLIO_KERNELS_CPU_ATTENTION_ROWS4_H_

#include <cstdint>
#include <type_traits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_prefetch.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/kv_quant.h"

namespace folio::kernels::cpu::attention_internal {
namespace {  // NOLINT(google-build-namespaces): private header

// Four query rows at a time (a GQA group of 4 or more heads sharing a KV
// head), AVX2 + FMA: every key or value vector is loaded once for the four
// rows, so the loops are bound by the FMAs instead of the loads (Dot8 /
// Axpy8 load a key or value vector per row), and a quantized cache's codes
// are widened right in the loop (8 per vpmovsxbd / vpmovzxbd), never stored
// as fp32. Picked at run time on CPUs with AVX2 and FMA; elsewhere the
// one-row loops of attention_internal.h serve. Intrinsics, not vector
// extensions: GCC widens 8-byte vectors lane by lane.
//
// Keys a ScoresPiece4 step takes for keys of type E: three (12 accumulators,
// 3 keys and a query fill the 16 AVX2 registers), two for fp8 codes, whose
// decoding needs registers of its own (at three keys it spilled and ran 10%
// slower; int8 ran 10-20% faster than at two).
template <class E>
constexpr int32_t kScoreKeys = std::is_same_v<E, Fp8E4m3> ? 2 : 3;
// Value vectors (8 dimensions each) a ValuesPiece4 step takes: two (8
// accumulators). Three measured no faster on an int8 cache (each value
// vector already feeds four FMAs from registers).
constexpr int32_t kValueVectors = 2;

#if defined(__x86_64__) && defined(__GNUC__)
#define FOLIO_ATTENTION_ROWS4 1
#define FOLIO_AVX2_FMA __attribute__((target("avx2,fma")))

// Eight keys or values as fp32 (a quantized cache's codes widened; their
// scale is applied by the caller): DecodeKv, eight lanes at a time.
FOLIO_AVX2_FMA inline __attribute__((always_inline)) __m256 LoadKv8(const float* p) {
  return _mm256_loadu_ps(p);
}
FOLIO_AVX2_FMA inline __attribute__((always_inline)) __m256 LoadKv8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
FOLIO_AVX2_FMA inline __attribute__((always_inline)) __m256 LoadKv8(const Fp8E4m3* p) {
  const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m256i magnitude = _mm256_and_si256(b, _mm256_set1_epi32(0x7f));
  const __m256i normal =
      _mm256_add_epi32(_mm256_slli_epi32(magnitude, 20), _mm256_set1_epi32(120 << 23));
  const __m256 subnormal = _mm256_mul_ps(_mm256_cvtepi32_ps(magnitude), _mm256_set1_ps(0x1p-9f));
  const __m256i is_subnormal = _mm256_cmpgt_epi32(_mm256_set1_epi32(8), magnitude);
  const __m256 value = _mm256_blendv_ps(_mm256_castsi256_ps(normal), subnormal,
                                        _mm256_castsi256_ps(is_subnormal));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x80)), 24);
  return _mm256_or_ps(value, _mm256_castsi256_ps(sign));
}

// The four sums of a, b, c and d's lanes, in that order.
FOLIO_AVX2_FMA inline __attribute__((always_inline)) __m128 Sum8x4(__m256 a, __m256 b, __m256 c,
                                                                  __m256 d) {
  const __m256 u = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
}

// s[r][j] = scale * q_r . k_j for rows r < 4 (q rows hd apart, s rows
// kTileTokens apart) and the K keys at k (hd apart). Each key vector is
// loaded once for the four rows and each query vector once for the K keys:
// at K = 3 the loop issues 7 loads per 12 FMAs (two keys: 10 per 8), so it
// is bound by the FMAs, and 12 accumulators + 3 keys + 1 query fill the 16
// registers. hd: a multiple of 8.
template <int K, class E>
FOLIO_AVX2_FMA inline __attribute__((always_inline)) void ScoreKeys4(const float* q, const E* k,
                                                                    int32_t hd, float scale,
                                                                    float* s) {
  __m256 a[4][K];
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < K; ++j) a[r][j] = _mm256_setzero_ps();
  }
  for (int32_t d = 0; d < hd; d += 8) {
    __m256 x[K];
#pragma GCC unroll 4
    for (int j = 0; j < K; ++j) x[j] = LoadKv8(k + int64_t{j} * hd + d);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m256 y = _mm256_loadu_ps(q + int64_t{r} * hd + d);
#pragma GCC unroll 4
      for (int j = 0; j < K; ++j) a[r][j] = _mm256_fmadd_ps(y, x[j], a[r][j]);
    }
  }
  // Key j's four row sums at once, scaled, one lane to each row.
#pragma GCC unroll 4
  for (int j = 0; j < K; ++j) {
    const __m128 v = _mm_mul_ps(Sum8x4(a[0][j], a[1][j], a[2][j], a[3][j]), _mm_set1_ps(scale));
    _mm_store_ss(s + j, v);
    _MM_EXTRACT_FLOAT(s[kTileTokens + j], v, 1);
    _MM_EXTRACT_FLOAT(s[2 * kTileTokens + j], v, 2);
    _MM_EXTRACT_FLOAT(s[3 * kTileTokens + j], v, 3);
  }
}

// s[r][j] = scale * q_r . k_j for rows r < 4 and the `run` keys at k,
// kScoreKeys<E> keys a step (one prefetch step each), the last few in a
// shorter step. E: fp32 keys (scale 1), or a quantized cache's codes
// and their scale.
template <class E>
FOLIO_AVX2_FMA void ScoresPiece4(const float* q, const E* k, int32_t run, int32_t hd, float scale,
                                 float* s, PrefetchCursor& pf) {
  int32_t j = 0;
  constexpr int32_t kKeys = kScoreKeys<E>;
  for (; j + kKeys <= run; j += kKeys) {
    ScoreKeys4<kKeys>(q, k + int64_t{j} * hd, hd, scale, s + j);
    pf.Step();
  }
  if (run - j == 2) {
    ScoreKeys4<2>(q, k + int64_t{j} * hd, hd, scale, s + j);
    pf.Step();
  } else if (run - j == 1) {
    ScoreKeys4<1>(q, k + int64_t{j} * hd, hd, scale, s + j);
    pf.Step();
  }
}

// acc_r += scale * sum_j p[r][j] * v_j for rows r < 4 (p rows kTileTokens
// apart, acc rows hd apart) over the `run` values at v (hd apart), for the
// V * 8 dimensions at v and acc, the 4 * V accumulators in registers across
// all the values: each value vector is loaded once for the four rows.
template <int V, class E>
FOLIO_AVX2_FMA inline __attribute__((always_inline)) void ValueDims4(const float* p, const E* v,
                                                                    int32_t run, int32_t hd,
                                                                    __m256 scale, float* acc) {
  __m256 a[4][V];
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
#pragma GCC unroll 4
    for (int i = 0; i < V; ++i) a[r][i] = _mm256_setzero_ps();
  }
  const E* vr = v;
  for (int32_t j = 0; j < run; ++j, vr += hd) {
    __m256 x[V];
#pragma GCC unroll 4
    for (int i = 0; i < V; ++i) x[i] = LoadKv8(vr + 8 * i);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m256 w = _mm256_broadcast_ss(p + r * kTileTokens + j);
#pragma GCC unroll 4
      for (int i = 0; i < V; ++i) a[r][i] = _mm256_fmadd_ps(w, x[i], a[r][i]);
    }
  }
  // The piece's sums started at zero and join acc once, times the scale.
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
#pragma GCC unroll 4
    for (int i = 0; i < V; ++i) {
      float* c = acc + int64_t{r} * hd + 8 * i;
      _mm256_storeu_ps(c, _mm256_fmadd_ps(a[r][i], scale, _mm256_loadu_ps(c)));
    }
  }
}

// acc_r += scale * sum_j p[r][j] * v_j for rows r < 4 and the `run` values
// at v, kValueVectors * 8 dimensions a step (one prefetch step each), the
// last 8 (head_dim 8 mod 16) in a shorter step. E as in ScoresPiece4.
template <class E>
FOLIO_AVX2_FMA void ValuesPiece4(const float* p, const E* v, int32_t run, int32_t hd, float scale,
                                 float* acc, PrefetchCursor& pf) {
  static_assert(kValueVectors == 2, "the tail below takes the one vector left");
  constexpr int32_t kDims = 8 * kValueVectors;
  const __m256 sv = _mm256_set1_ps(scale);
  int32_t d = 0;
  for (; d + kDims <= hd; d += kDims) {
    ValueDims4<kValueVectors>(p, v + d, run, hd, sv, acc + d);
    pf.Step();
  }
  if (d < hd) {
    ValueDims4<1>(p, v + d, run, hd, sv, acc + d);
    pf.Step();
  }
}
#endif

}  // namespace
}  // namespace folio::kernels::cpu::attention_internal

#endif  // FOLIO_KERNELS_CPU_ATTENTION_ROWS4_H_
