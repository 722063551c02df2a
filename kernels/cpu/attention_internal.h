// PRIVATE to the CPU attention kernels (kernels/cpu/attention_decode.cc,
// kernels/cpu/attention_prefill.cc); include it nowhere else. The pieces both
// kernels share: the SIMD inner loops over head_dim, the key/value sources
// (paged and contiguous), the per-thread scratch with its online-softmax
// state, the generic tile loop (AttendRange), the work-item runner and the
// driver plumbing; the software prefetch (attention_prefetch.h) and the
// AVX2 + FMA four-row loops (attention_rows4.h) have headers of their own. The public API and the
// algorithm are described in kernels/cpu/attention.h.
//
// Everything here was file-local to the single attention.cc before the
// decode/prefill split and must stay inlinable: small helpers are
// FOLIO_ALWAYS_INLINE / inline; functions carrying FOLIO_SIMD_CLONES
// (target_clones, kernels/cpu/vec_math.h) and the templates are `static`,
// so each including .cc gets its own internal copy, as before the split.
#ifndef FOLIO_KERNELS_CPU_ATTENTION_INTERNAL_H_
#define FOLIO_KERNELS_CPU_ATTENTION_INTERNAL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_prefetch.h"
#include "kernels/cpu/attention_rows4.h"
#include "kernels/cpu/kv_quant.h"
#include "kernels/cpu/vec_math.h"

namespace folio::kernels::cpu::attention_internal {
// Anonymous, as in the one .cc this came from: internal linkage keeps GCC's
// inlining decisions (and so the hot loops' code) what they were.
namespace {  // NOLINT(google-build-namespaces): private header

// ---------------------------------------------------------------------------
// Inner loops over head_dim. Each `#pragma omp simd` loop keeps its
// accumulators in vector registers; several independent rows per loop give
// the CPU independent dependency chains (one row alone would be bound by the
// add latency). `hd` is any positive count; the kernels use multiples of 8.

// s[j] = q . k_j for the 8 rows k_j = k + j * hd.
FOLIO_ALWAYS_INLINE void Dot8(const float* __restrict q, const float* __restrict k, int32_t hd,
                              float* __restrict s) {
  const float* k0 = k;
  const float* k1 = k0 + hd;
  const float* k2 = k1 + hd;
  const float* k3 = k2 + hd;
  const float* k4 = k3 + hd;
  const float* k5 = k4 + hd;
  const float* k6 = k5 + hd;
  const float* k7 = k6 + hd;
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3, s4, s5, s6, s7)
  for (int32_t d = 0; d < hd; ++d) {
    const float x = q[d];
    s0 += x * k0[d];
    s1 += x * k1[d];
    s2 += x * k2[d];
    s3 += x * k3[d];
    s4 += x * k4[d];
    s5 += x * k5[d];
    s6 += x * k6[d];
    s7 += x * k7[d];
  }
  s[0] = s0, s[1] = s1, s[2] = s2, s[3] = s3, s[4] = s4, s[5] = s5, s[6] = s6, s[7] = s7;
}

FOLIO_ALWAYS_INLINE void Dot4(const float* __restrict q, const float* __restrict k, int32_t hd,
                              float* __restrict s) {
  const float* k0 = k;
  const float* k1 = k0 + hd;
  const float* k2 = k1 + hd;
  const float* k3 = k2 + hd;
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
  for (int32_t d = 0; d < hd; ++d) {
    const float x = q[d];
    s0 += x * k0[d];
    s1 += x * k1[d];
    s2 += x * k2[d];
    s3 += x * k3[d];
  }
  s[0] = s0, s[1] = s1, s[2] = s2, s[3] = s3;
}

FOLIO_ALWAYS_INLINE float Dot1(const float* __restrict q, const float* __restrict k, int32_t hd) {
  float s0 = 0;
#pragma omp simd reduction(+ : s0)
  for (int32_t d = 0; d < hd; ++d) s0 += q[d] * k[d];
  return s0;
}

// acc += sum_j p[j] * v_j for the 8 rows v_j = v + j * hd.
FOLIO_ALWAYS_INLINE void Axpy8(const float* __restrict p, const float* __restrict v, int32_t hd,
                               float* __restrict acc) {
  const float p0 = p[0], p1 = p[1], p2 = p[2], p3 = p[3];
  const float p4 = p[4], p5 = p[5], p6 = p[6], p7 = p[7];
  const float* v0 = v;
  const float* v1 = v0 + hd;
  const float* v2 = v1 + hd;
  const float* v3 = v2 + hd;
  const float* v4 = v3 + hd;
  const float* v5 = v4 + hd;
  const float* v6 = v5 + hd;
  const float* v7 = v6 + hd;
#pragma omp simd
  for (int32_t d = 0; d < hd; ++d) {
    acc[d] += ((p0 * v0[d] + p1 * v1[d]) + (p2 * v2[d] + p3 * v3[d])) +
              ((p4 * v4[d] + p5 * v5[d]) + (p6 * v6[d] + p7 * v7[d]));
  }
}

FOLIO_ALWAYS_INLINE void Axpy4(const float* __restrict p, const float* __restrict v, int32_t hd,
                               float* __restrict acc) {
  const float p0 = p[0], p1 = p[1], p2 = p[2], p3 = p[3];
  const float* v0 = v;
  const float* v1 = v0 + hd;
  const float* v2 = v1 + hd;
  const float* v3 = v2 + hd;
#pragma omp simd
  for (int32_t d = 0; d < hd; ++d) {
    acc[d] += (p0 * v0[d] + p1 * v1[d]) + (p2 * v2[d] + p3 * v3[d]);
  }
}

FOLIO_ALWAYS_INLINE void Axpy1(float p, const float* __restrict v, int32_t hd,
                               float* __restrict acc) {
#pragma omp simd
  for (int32_t d = 0; d < hd; ++d) acc[d] += p * v[d];
}

// ---------------------------------------------------------------------------
// Where the keys and values of one (sequence, KV head) live. Locate(pos, &run)
// returns the element offset of position pos in K (and V) and sets run to
// the number of positions stored contiguously from there.

// head_stride: offset from one KV head's rows to the next head's for the
// same positions (an item may cover several heads). Offsets count E
// elements (bytes, for the one-byte codes of a quantized cache).
template <class E>
struct PagedSource {
  using Elem = E;
  static constexpr bool kQuantized = !std::is_same_v<E, float>;
  const E* k;
  const E* v;
  const int32_t* table;  // this sequence's block table row
  int64_t block_stride;  // fp32: num_kv_heads * block_size * head_dim; quantized: BlockBytes
  int64_t head_offset;   // first kv_head * block_size * head_dim
  int64_t head_stride;   // block_size * head_dim: a block holds every head
  int32_t block_size;
  int32_t hd;
  int64_t scales_offset;  // quantized: from a block's start to its first head's scale

  int64_t Locate(int32_t pos, int32_t* run) const {
    const int32_t b = pos / block_size;
    const int32_t o = pos - b * block_size;
    *run = block_size - o;
    return table[b] * block_stride + head_offset + int64_t{o} * hd;
  }
  // Quantized: the K (V) scales of the block holding pos, from the item's
  // first KV head on (head j of the item at [j]).
  const float* KScales(int32_t pos) const { return Scales(k, pos); }
  const float* VScales(int32_t pos) const { return Scales(v, pos); }

 private:
  const float* Scales(const E* base, int32_t pos) const {
    return reinterpret_cast<const float*>(base + table[pos / block_size] * block_stride +
                                          scales_offset);
  }
};

// A contiguous cache is walked in aligned pieces of kContiguousRun
// positions: one tile-long piece would prefetch a whole tile (32 KiB at
// head_dim 128) ahead, past what L1 holds; 16-32 measured fastest.
struct ContiguousSource {
  using Elem = float;
  static constexpr bool kQuantized = false;
  static constexpr int32_t kContiguousRun = 32;
  const float* k;
  const float* v;
  int64_t base;         // offset of position 0 of this (sequence, first KV head)
  int64_t head_stride;  // max_seq_len * head_dim
  int32_t hd;

  int64_t Locate(int32_t pos, int32_t* run) const {
    *run = kContiguousRun - pos % kContiguousRun;
    return base + int64_t{pos} * hd;
  }
};

// The first position a query at `pos` attends to: its last sliding_window
// positions (> 0), or from position 0.
inline int32_t FirstVisible(int32_t pos, int32_t sliding_window) {
  return sliding_window > 0 ? std::max(0, pos - sliding_window + 1) : 0;
}

// ---------------------------------------------------------------------------
// One work item: m query rows that share a KV head, with their online-softmax
// state. Lives in per-thread scratch, sized once per kernel call.

struct Scratch {
  Scratch(int32_t max_rows, int32_t hd)
      : buf(static_cast<size_t>(max_rows) * (2 * hd + kTileTokens + 4)),
        limit(max_rows),
        first(max_rows) {
    q = buf.data();
    acc = q + int64_t{max_rows} * hd;
    s = acc + int64_t{max_rows} * hd;
    mx = s + int64_t{max_rows} * kTileTokens;
    sum = mx + max_rows;
    tmax = sum + max_rows;
    alpha = tmax + max_rows;
  }

  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  // Starts an item of m rows: running max -inf, running sum 0, acc 0.
  void Reset(int32_t m, int32_t hd) {
    std::fill(mx, mx + m, kNegInf);
    std::fill(sum, sum + m, 0.0f);
    std::fill(acc, acc + int64_t{m} * hd, 0.0f);
  }

  std::vector<float> buf;
  std::vector<int32_t> limit;  // [m] last position each row may attend to
  std::vector<int32_t> first;  // [m] first one (> 0 under a sliding window)
  float* q;                    // [m][hd] query rows, pre-multiplied by scale
  float* acc;                  // [m][hd] unnormalized output
  float* s;                    // [m][kTileTokens] scores, then probabilities
  float* mx;                   // [m] running max
  float* sum;                  // [m] running sum of exp(score - mx)
  float* tmax;                 // [m] tiled prefill: the tile's max
  float* alpha;                // [m] tiled prefill: rescale of earlier tiles
  // [kTileTokens][hd], quantized caches only (sized by WidenScratch): a
  // piece's or tile's keys or values widened to fp32.
  std::vector<float> kv;
};

// Sizes sc.kv for a source whose codes may be widened (a no-op after the
// first call on a thread's scratch, and for fp32 sources).
template <class Src>
static void WidenScratch(const Src& src, Scratch& sc) {
  if constexpr (Src::kQuantized) sc.kv.resize(static_cast<size_t>(kTileTokens) * src.hd);
}

// Copies row r of the item from src (scaled) into the scratch.
inline void LoadQueryRow(const float* __restrict src, float scale, int32_t hd,
                         float* __restrict dst) {
#pragma omp simd
  for (int32_t d = 0; d < hd; ++d) dst[d] = src[d] * scale;
}

// out = acc / sum, or zeros for a row that saw no position.
inline void StoreOutputRow(const float* __restrict acc, float sum, int32_t hd,
                           float* __restrict out) {
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma omp simd
  for (int32_t d = 0; d < hd; ++d) out[d] = acc[d] * inv;
}

// ---------------------------------------------------------------------------
// GCC/Clang 8-float vectors, for the tiled prefill (attention_prefill.cc).
#if defined(__GNUC__)
#define FOLIO_ATTENTION_V8 1
#pragma GCC diagnostic ignored "-Wpsabi"  // V8 only passes between inlined helpers
typedef float V8 __attribute__((vector_size(32)));
FOLIO_ALWAYS_INLINE V8 LoadV8(const float* p) {
  V8 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
FOLIO_ALWAYS_INLINE void StoreV8(float* p, V8 v) { __builtin_memcpy(p, &v, sizeof v); }
#endif

// ---------------------------------------------------------------------------
// Calls of Dot8/Dot4/Dot1 (or Axpy*) for a piece: the prefetch steps.
inline int32_t PieceSteps(int32_t m, int32_t run) {
  return m * (run / 8 + (run % 8) / 4 + run % 4);
}

// Whether m rows take the four-row loops (ScoresRows / ValuesRows), and the
// prefetch steps those take over m rows of a piece.
inline bool RowsOf4(int32_t m) {
#ifdef FOLIO_ATTENTION_ROWS4
  return m % 4 == 0 && HaveAvx2Fma();
#else
  return false;
#endif
}
template <class E>
int32_t ScoreSteps(int32_t m, int32_t run) {
  return RowsOf4(m) ? m / 4 * ((run + kScoreKeys<E> - 1) / kScoreKeys<E>) : PieceSteps(m, run);
}
inline int32_t ValueSteps(int32_t m, int32_t run, int32_t hd) {
  constexpr int32_t kDims = 8 * kValueVectors;
  return RowsOf4(m) ? m / 4 * ((hd + kDims - 1) / kDims) : PieceSteps(m, run);
}

// Scores s[r][j] = q_r . k_j for the `run` contiguous key rows at k.
static FOLIO_SIMD_CLONES void ScoresPiece(const float* q, int32_t m, const float* k, int32_t run,
                                   int32_t hd, float* s, PrefetchCursor& pf) {
  int32_t j = 0;
  for (; j + 8 <= run; j += 8) {
    for (int32_t r = 0; r < m; ++r) {
      Dot8(q + int64_t{r} * hd, k + int64_t{j} * hd, hd, s + r * kTileTokens + j);
      pf.Step();
    }
  }
  for (; j + 4 <= run; j += 4) {
    for (int32_t r = 0; r < m; ++r) {
      Dot4(q + int64_t{r} * hd, k + int64_t{j} * hd, hd, s + r * kTileTokens + j);
      pf.Step();
    }
  }
  for (; j < run; ++j) {
    for (int32_t r = 0; r < m; ++r) {
      s[r * kTileTokens + j] = Dot1(q + int64_t{r} * hd, k + int64_t{j} * hd, hd);
      pf.Step();
    }
  }
}

// acc_r += sum_j p[r][j] * v_j for the `run` contiguous value rows at v.
static FOLIO_SIMD_CLONES void ValuesPiece(const float* p, int32_t m, const float* v, int32_t run,
                                   int32_t hd, float* acc, PrefetchCursor& pf) {
  int32_t j = 0;
  for (; j + 8 <= run; j += 8) {
    for (int32_t r = 0; r < m; ++r) {
      Axpy8(p + r * kTileTokens + j, v + int64_t{j} * hd, hd, acc + int64_t{r} * hd);
      pf.Step();
    }
  }
  for (; j + 4 <= run; j += 4) {
    for (int32_t r = 0; r < m; ++r) {
      Axpy4(p + r * kTileTokens + j, v + int64_t{j} * hd, hd, acc + int64_t{r} * hd);
      pf.Step();
    }
  }
  for (; j < run; ++j) {
    for (int32_t r = 0; r < m; ++r) {
      Axpy1(p[r * kTileTokens + j], v + int64_t{j} * hd, hd, acc + int64_t{r} * hd);
      pf.Step();
    }
  }
}

// A quantized cache's codes of one piece (one block, one KV head) widened to
// fp32 and multiplied by their block's scale, into scratch the fp32 loops
// above then read from L1: one conversion per code however many query rows
// read it, and the inner loops stay the fp32 ones.
template <class E>
static FOLIO_SIMD_CLONES void DequantizePiece(const E* __restrict codes, int64_t n, float scale,
                                              float* __restrict out) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = DecodeKv(codes[i]) * scale;
}

// Where the fp32 keys (values) of a piece are: in the fp32 cache itself, or
// widened into kv (scratch sized by WidenScratch) from a quantized one.
template <class Src>
FOLIO_ALWAYS_INLINE const float* PieceKv(const Src& src, bool key, int64_t off, int32_t pos,
                                         int32_t run, int32_t head, float* kv) {
  if constexpr (Src::kQuantized) {
    const float scale = key ? src.KScales(pos)[head] : src.VScales(pos)[head];
    DequantizePiece(key ? src.k + off : src.v + off, int64_t{run} * src.hd, scale, kv);
    return kv;
  } else {
    return (key ? src.k : src.v) + off;
  }
}

// Scores of m rows (hd apart, s rows kTileTokens apart) against the keys of
// a piece (element offset off in src, position pos, run keys) of the item's
// KV head `head`: four rows at a time straight from the cache (fp32 or
// codes), else one row at a time from fp32 (widened into kv when quantized).
template <class Src>
FOLIO_ALWAYS_INLINE void ScoresRows(const Src& src, int64_t off, int32_t pos, int32_t run,
                                    int32_t head, const float* q, int32_t m, float* s, float* kv,
                                    PrefetchCursor& pf) {
#ifdef FOLIO_ATTENTION_ROWS4
  if (RowsOf4(m)) {
    float scale = 1.0f;
    if constexpr (Src::kQuantized) scale = src.KScales(pos)[head];
    for (int32_t r = 0; r < m; r += 4) {
      ScoresPiece4(q + int64_t{r} * src.hd, src.k + off, run, src.hd, scale, s + r * kTileTokens, pf);
    }
    return;
  }
#endif
  ScoresPiece(q, m, PieceKv(src, true, off, pos, run, head, kv), run, src.hd, s, pf);
}

// acc of m rows += the piece's values weighted by p (rows kTileTokens apart).
template <class Src>
FOLIO_ALWAYS_INLINE void ValuesRows(const Src& src, int64_t off, int32_t pos, int32_t run,
                                    int32_t head, const float* p, int32_t m, float* acc, float* kv,
                                    PrefetchCursor& pf) {
#ifdef FOLIO_ATTENTION_ROWS4
  if (RowsOf4(m)) {
    float scale = 1.0f;
    if constexpr (Src::kQuantized) scale = src.VScales(pos)[head];
    for (int32_t r = 0; r < m; r += 4) {
      ValuesPiece4(p + r * kTileTokens, src.v + off, run, src.hd, scale, acc + int64_t{r} * src.hd,
                   pf);
    }
    return;
  }
#endif
  ValuesPiece(p, m, PieceKv(src, false, off, pos, run, head, kv), run, src.hd, acc, pf);
}

// Online softmax over one tile of n positions starting at t0 for row r:
// masks positions outside the row's [first, limit], updates the running max
// (rescaling sum and acc when it grows) and turns the scores into
// probabilities.
static FOLIO_SIMD_CLONES void SoftmaxTileRow(Scratch& sc, int32_t r, int32_t t0, int32_t n, int32_t hd) {
  float* __restrict s = sc.s + r * kTileTokens;
  const int32_t lo = std::clamp(sc.first[r] - t0, 0, n);
  const int32_t valid = std::clamp(sc.limit[r] - t0 + 1, 0, n);
  if (lo >= valid) {  // the whole tile lies outside this row's window
    std::fill(s, s + n, 0.0f);
    return;
  }
  const float mt = MaxOf(s + lo, valid - lo);
  const float m_old = sc.mx[r];
  const float m_new = std::max(m_old, mt);
  if (m_new > m_old) {
    if (m_old != kNegInf) {  // rescale what earlier tiles accumulated
      const float alpha = std::exp(m_old - m_new);
      sc.sum[r] *= alpha;
      float* __restrict a = sc.acc + int64_t{r} * hd;
#pragma omp simd
      for (int32_t d = 0; d < hd; ++d) a[d] *= alpha;
    }
    sc.mx[r] = m_new;
  }
  float tile_sum = 0.0f;
#pragma omp simd reduction(+ : tile_sum)
  for (int32_t t = lo; t < valid; ++t) {
    const float e = FastExp(s[t] - m_new);
    s[t] = e;
    tile_sum += e;
  }
  for (int32_t t = 0; t < lo; ++t) s[t] = 0.0f;
  for (int32_t t = valid; t < n; ++t) s[t] = 0.0f;
  sc.sum[r] += tile_sum;
}

// Attends the sc.q rows to positions [begin, end) of src, each row only to
// its own [sc.first, sc.limit], folding into the running state. The rows
// are `groups` groups of g rows; group j reads KV head (src's first head +
// j). A row may see nothing in a tile (or the whole range): its state then
// stays as it was.
template <class Src>
static void AttendRange(const Src& src, Scratch& sc, int32_t groups, int32_t g, int32_t begin,
                 int32_t end) {
  const int32_t hd = src.hd;
  const int32_t m = groups * g;
  WidenScratch(src, sc);
  // A tile's pieces: runs of positions stored contiguously (a block, or an
  // aligned run of a contiguous cache).
  struct Piece {
    int64_t off;  // of the first head
    int32_t pos, run;
  };
  Piece buffers[2][kTileTokens];
  auto split = [&](int32_t t0, Piece* out) {
    const int32_t stop = std::min(end, t0 + kTileTokens);
    int32_t count = 0;
    for (int32_t p = t0; p < stop; ++count) {
      int32_t run;
      const int64_t off = src.Locate(p, &run);
      run = std::min(run, stop - p);
      out[count] = {off, p, run};
      p += run;
    }
    return count;
  };
  Piece* cur = buffers[0];
  Piece* next = buffers[1];
  int32_t n_cur = split(begin, cur);
  PrefetchCursor pf;
  for (int32_t t0 = begin; t0 < end; t0 += kTileTokens) {
    const int32_t n = std::min(kTileTokens, end - t0);
    const int32_t n_next = split(t0 + kTileTokens, next);
    // Reads in order: K of each (piece, head), V of each (piece, head), then
    // the next tile's K. While access a is computed on, access
    // a + kPrefetchAhead is fetched. With several heads per item a block's
    // heads are adjacent in memory, so reads run through whole blocks.
    const int32_t per_pass = n_cur * groups;
    auto prefetch_for = [&](int32_t a, int32_t steps) {
      int32_t b = a + kPrefetchAhead;
      const Piece* piece = nullptr;
      const typename Src::Elem* base = src.k;
      if (b < per_pass) {
        piece = &cur[b / groups];
      } else if (b < 2 * per_pass) {
        b -= per_pass, piece = &cur[b / groups], base = src.v;
      } else if (b - 2 * per_pass < n_next * groups) {
        b -= 2 * per_pass, piece = &next[b / groups];
      }
      if (piece == nullptr) {
        pf.Reset(nullptr, 0, 1);
      } else {
        pf.Reset(base + piece->off + (b % groups) * src.head_stride,
                 int64_t{piece->run} * hd * int64_t{sizeof(typename Src::Elem)}, steps);
      }
    };
    for (int32_t i = 0; i < n_cur; ++i) {
      const Piece& c = cur[i];
      for (int32_t j = 0; j < groups; ++j) {
        prefetch_for(i * groups + j, ScoreSteps<typename Src::Elem>(g, c.run));
        ScoresRows(src, c.off + j * src.head_stride, c.pos, c.run, j, sc.q + int64_t{j} * g * hd,
                   g, sc.s + j * g * kTileTokens + (c.pos - t0), sc.kv.data(), pf);
      }
    }
    for (int32_t r = 0; r < m; ++r) SoftmaxTileRow(sc, r, t0, n, hd);
    for (int32_t i = 0; i < n_cur; ++i) {
      const Piece& c = cur[i];
      for (int32_t j = 0; j < groups; ++j) {
        prefetch_for(per_pass + i * groups + j, ValueSteps(g, c.run, hd));
        ValuesRows(src, c.off + j * src.head_stride, c.pos, c.run, j,
                   sc.s + j * g * kTileTokens + (c.pos - t0), g, sc.acc + int64_t{j} * g * hd,
                   sc.kv.data(), pf);
      }
    }
    std::swap(cur, next);
    n_cur = n_next;
  }
}

// Runs fn(item, scratch) for item in [0, n) on the OpenMP threads (dynamic
// schedule: items differ in cost), each thread with its own scratch.
// Small jobs (macs: a rough cost) stay on the calling thread.
template <class Fn>
static void ForEachItem(int64_t n, double macs, int32_t max_rows, int32_t hd, Fn fn) {
  constexpr double kMinParallelMacs = 1 << 18;
  [[maybe_unused]] const bool parallel = n > 1 && macs >= kMinParallelMacs;
#pragma omp parallel if (parallel)
  {
    Scratch sc(max_rows, hd);
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < n; ++i) fn(i, sc);
  }
}

// ---------------------------------------------------------------------------
// Drivers. `SourceAt(s, h)` builds the source of (sequence s, KV head h).

struct Shape {
  int32_t num_seqs;
  int32_t num_heads;
  int32_t num_kv_heads;
  int32_t hd;
  int32_t group() const { return num_heads / num_kv_heads; }
};

inline int32_t MaxThreads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// E: float for an fp32 cache, int8_t or Fp8E4m3 for a quantized one
// (kv.dtype says which).
template <class E>
static auto PagedSourceAt(const PagedKvLayer& kv, const BlockTables& tables) {
  return [&kv, &tables](int32_t s, int32_t h) {
    const int64_t tile = int64_t{kv.block_size} * kv.head_dim;
    const CacheShape shape{kv.num_kv_heads, kv.block_size, kv.head_dim};
    const int64_t block_stride =
        PagedSource<E>::kQuantized ? BlockBytes(shape, kv.dtype) : BlockElems(shape);
    return PagedSource<E>{static_cast<const E*>(kv.k),
                          static_cast<const E*>(kv.v),
                          tables.ids + int64_t{s} * tables.max_blocks_per_seq,
                          block_stride,
                          h * tile,
                          tile,
                          kv.block_size,
                          kv.head_dim,
                          BlockElems(shape) + int64_t{4} * h};
  };
}

// Calls run(PagedSourceAt<E>(kv, tables)) with E the element type of kv.
template <class Run>
static void WithPagedSource(const PagedKvLayer& kv, const BlockTables& tables, Run run) {
  switch (kv.dtype) {
    case CacheDtype::kInt8: run(PagedSourceAt<int8_t>(kv, tables)); return;
    case CacheDtype::kFp8E4m3: run(PagedSourceAt<Fp8E4m3>(kv, tables)); return;
    default: run(PagedSourceAt<float>(kv, tables)); return;
  }
}

static auto ContiguousSourceAt(const ContiguousKvLayer& kv) {
  return [&kv](int32_t s, int32_t h) {
    const int64_t base = (int64_t{s} * kv.num_kv_heads + h) * kv.max_seq_len * int64_t{kv.head_dim};
    return ContiguousSource{kv.k, kv.v, base, int64_t{kv.max_seq_len} * kv.head_dim, kv.head_dim};
  };
}

}  // namespace
}  // namespace folio::kernels::cpu::attention_internal

#endif  // FOLIO_KERNELS_CPU_ATTENTION_INTERNAL_H_
