#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/cpu/vec_math.h"

namespace folio::kernels {
namespace {

bool Fail(std::string* error, std::string message) {
  if (error != nullptr) *error = std::move(message);
  return false;
}

}  // namespace

namespace cpu {
namespace {

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
// same positions (an item may cover several heads).
struct PagedSource {
  const float* k;
  const float* v;
  const int32_t* table;  // this sequence's block table row
  int64_t block_stride;  // num_kv_heads * block_size * head_dim
  int64_t head_offset;   // first kv_head * block_size * head_dim
  int64_t head_stride;   // block_size * head_dim: a block holds every head
  int32_t block_size;
  int32_t hd;

  int64_t Locate(int32_t pos, int32_t* run) const {
    const int32_t b = pos / block_size;
    const int32_t o = pos - b * block_size;
    *run = block_size - o;
    return table[b] * block_stride + head_offset + int64_t{o} * hd;
  }
};

// A contiguous cache is walked in aligned pieces of kContiguousRun
// positions: one tile-long piece would prefetch a whole tile (32 KiB at
// head_dim 128) ahead, past what L1 holds; 16-32 measured fastest.
struct ContiguousSource {
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

// ---------------------------------------------------------------------------
// One work item: m query rows that share a KV head, with their online-softmax
// state. Lives in per-thread scratch, sized once per kernel call.

struct Scratch {
  Scratch(int32_t max_rows, int32_t hd)
      : buf(static_cast<size_t>(max_rows) * (2 * hd + kTileTokens + 4)), limit(max_rows) {
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
  float* q;                    // [m][hd] query rows, pre-multiplied by scale
  float* acc;                  // [m][hd] unnormalized output
  float* s;                    // [m][kTileTokens] scores, then probabilities
  float* mx;                   // [m] running max
  float* sum;                  // [m] running sum of exp(score - mx)
  float* tmax;                 // [m] tiled prefill: the tile's max
  float* alpha;                // [m] tiled prefill: rescale of earlier tiles
};

// Software prefetch spread over the compute of one piece: the piece after
// the current one (paged blocks sit at unrelated addresses, which the
// hardware prefetchers only find after a few misses) is requested a few
// cache lines at a time between the dot products, so that the loads overlap
// the arithmetic instead of stalling in one burst.
#ifndef FOLIO_PREFETCH_AHEAD
#define FOLIO_PREFETCH_AHEAD 1
#endif
// Pieces between a piece's prefetch and its use.
constexpr int32_t kPrefetchAhead = FOLIO_PREFETCH_AHEAD;

class PrefetchCursor {
 public:
  // Spreads [p, p + floats) over about `steps` calls of Step().
  void Reset(const float* p, int64_t floats, int32_t steps) {
    next_ = reinterpret_cast<const char*>(p);
    end_ = next_ + floats * int64_t{sizeof(float)};
    const int64_t lines = (end_ - next_ + kLine - 1) / kLine;
    per_step_ =
        static_cast<int32_t>(std::max<int64_t>(1, (lines + steps - 1) / std::max(1, steps)));
  }
  void Step() {
#if defined(__GNUC__)
    for (int32_t i = 0; i < per_step_ && next_ < end_; ++i, next_ += kLine) {
      __builtin_prefetch(next_, 0, 2);
    }
#endif
  }

 private:
  static constexpr int64_t kLine = 64;
  const char* next_ = nullptr;
  const char* end_ = nullptr;
  int32_t per_step_ = 0;
};

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

// Calls of Dot8/Dot4/Dot1 (or Axpy*) for a piece: the prefetch steps.
inline int32_t PieceSteps(int32_t m, int32_t run) {
  return m * (run / 8 + (run % 8) / 4 + run % 4);
}

// Scores s[r][j] = q_r . k_j for the `run` contiguous key rows at k.
FOLIO_SIMD_CLONES void ScoresPiece(const float* q, int32_t m, const float* k, int32_t run,
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
FOLIO_SIMD_CLONES void ValuesPiece(const float* p, int32_t m, const float* v, int32_t run,
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

// Online softmax over one tile of n positions starting at t0 for row r:
// masks positions past the row's limit, updates the running max (rescaling
// sum and acc when it grows) and turns the scores into probabilities.
FOLIO_SIMD_CLONES void SoftmaxTileRow(Scratch& sc, int32_t r, int32_t t0, int32_t n, int32_t hd) {
  float* __restrict s = sc.s + r * kTileTokens;
  const int32_t valid = std::clamp(sc.limit[r] - t0 + 1, 0, n);
  if (valid == 0) {  // the whole tile lies past this row's position
    std::fill(s, s + n, 0.0f);
    return;
  }
  float mt = kNegInf;
#pragma omp simd reduction(max : mt)
  for (int32_t t = 0; t < valid; ++t) mt = std::max(mt, s[t]);
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
  for (int32_t t = 0; t < valid; ++t) {
    const float e = FastExp(s[t] - m_new);
    s[t] = e;
    tile_sum += e;
  }
  for (int32_t t = valid; t < n; ++t) s[t] = 0.0f;
  sc.sum[r] += tile_sum;
}

// Attends the sc.q rows to positions [begin, end) of src, each row only up
// to its own limit (sc.limit), folding into the running state. The rows are
// `groups` groups of g rows; group j reads KV head (src's first head + j).
// REQUIRES: every row's limit >= begin (each row sees at least one position
// of the range), so no row's running max stays -inf after the first tile.
template <class Src>
void AttendRange(const Src& src, Scratch& sc, int32_t groups, int32_t g, int32_t begin,
                 int32_t end) {
  const int32_t hd = src.hd;
  const int32_t m = groups * g;
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
      const float* base = src.k;
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
        pf.Reset(base + piece->off + (b % groups) * src.head_stride, int64_t{piece->run} * hd,
                 steps);
      }
    };
    for (int32_t i = 0; i < n_cur; ++i) {
      const Piece& c = cur[i];
      for (int32_t j = 0; j < groups; ++j) {
        prefetch_for(i * groups + j, PieceSteps(g, c.run));
        ScoresPiece(sc.q + int64_t{j} * g * hd, g, src.k + c.off + j * src.head_stride, c.run, hd,
                    sc.s + j * g * kTileTokens + (c.pos - t0), pf);
      }
    }
    for (int32_t r = 0; r < m; ++r) SoftmaxTileRow(sc, r, t0, n, hd);
    for (int32_t i = 0; i < n_cur; ++i) {
      const Piece& c = cur[i];
      for (int32_t j = 0; j < groups; ++j) {
        prefetch_for(per_pass + i * groups + j, PieceSteps(g, c.run));
        ValuesPiece(sc.s + j * g * kTileTokens + (c.pos - t0), g,
                    src.v + c.off + j * src.head_stride, c.run, hd, sc.acc + int64_t{j} * g * hd,
                    pf);
      }
    }
    std::swap(cur, next);
    n_cur = n_next;
  }
}

// ---------------------------------------------------------------------------
// Tiled prefill: many query rows against the same keys. The generic path
// above computes each score as a dot product over head_dim (a horizontal
// sum per score, one q row at a time); with tens of rows per item that is
// a small matrix product, and it pays to do it as one, register-blocked:
//   scores   S^T[j][r] = sum_d K[j][d] * Q^T[d][r]   (4 keys x 16 rows/step)
//   softmax  across the rows of each key, vectorized over rows
//   values   acc[r][d] += sum_j P^T[j][r] * V[j][d]  (4 rows x 16 dims/step)
// Q is transposed once per item (scaled), S/P are kept transposed, so every
// inner loop is a broadcast times a contiguous vector with its accumulators
// in registers and K/V are read straight from their blocks. Rows are padded
// to a multiple of 16 (padded rows see nothing and are never stored).
// GCC/Clang vector extensions; elsewhere the generic path serves.
#if defined(__GNUC__)
#define FOLIO_TILED_PREFILL 1
// The helpers below always inline into the target_clones functions, so the
// baseline build's note about passing AVX vectors by value never applies.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float V8 __attribute__((vector_size(32)));
FOLIO_ALWAYS_INLINE V8 LoadV8(const float* p) {
  V8 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
FOLIO_ALWAYS_INLINE void StoreV8(float* p, V8 v) { __builtin_memcpy(p, &v, sizeof v); }

constexpr int32_t kRowPad = 16;

// Positions [pos, pos + run) stored contiguously at element offset off.
struct TilePiece {
  int64_t off;
  int32_t pos, run;
};

// st[(pos - t0) * mp + r] = K_pos . Q^T[:, r] for every key of the pieces.
FOLIO_SIMD_CLONES void ScoresTileT(const float* qt, int32_t mp, const float* k,
                                   const TilePiece* pieces, int32_t np, int32_t t0, int32_t hd,
                                   float* st) {
  for (int32_t i = 0; i < np; ++i) {
    const TilePiece& pc = pieces[i];
    const float* kp = k + pc.off;
    float* sp = st + int64_t{pc.pos - t0} * mp;
    int32_t j = 0;
    for (; j + 4 <= pc.run; j += 4) {
      const float* k0 = kp + int64_t{j} * hd;
      const float* k1 = k0 + hd;
      const float* k2 = k1 + hd;
      const float* k3 = k2 + hd;
      for (int32_t r = 0; r < mp; r += 16) {
        V8 a00{}, a01{}, a10{}, a11{}, a20{}, a21{}, a30{}, a31{};
        const float* q = qt + r;
        for (int32_t d = 0; d < hd; ++d, q += mp) {
          const V8 q0 = LoadV8(q), q1 = LoadV8(q + 8);
          // scalar * vector: a broadcast (a helper returning the splat
          // would be lowered for the baseline target before inlining).
          a00 += k0[d] * q0, a01 += k0[d] * q1;
          a10 += k1[d] * q0, a11 += k1[d] * q1;
          a20 += k2[d] * q0, a21 += k2[d] * q1;
          a30 += k3[d] * q0, a31 += k3[d] * q1;
        }
        float* o = sp + int64_t{j} * mp + r;
        StoreV8(o, a00), StoreV8(o + 8, a01);
        StoreV8(o + mp, a10), StoreV8(o + mp + 8, a11);
        StoreV8(o + 2 * mp, a20), StoreV8(o + 2 * mp + 8, a21);
        StoreV8(o + 3 * mp, a30), StoreV8(o + 3 * mp + 8, a31);
      }
    }
    for (; j < pc.run; ++j) {
      const float* k0 = kp + int64_t{j} * hd;
      for (int32_t r = 0; r < mp; r += 16) {
        V8 a0{}, a1{};
        const float* q = qt + r;
        for (int32_t d = 0; d < hd; ++d, q += mp) {
          a0 += k0[d] * LoadV8(q), a1 += k0[d] * LoadV8(q + 8);
        }
        StoreV8(sp + int64_t{j} * mp + r, a0), StoreV8(sp + int64_t{j} * mp + r + 8, a1);
      }
    }
  }
}

// Online softmax over keys [t0, t0 + n) for all mp rows at once: masks each
// row past its limit, updates running max and sum, rescales acc, and turns
// the scores into probabilities in place.
FOLIO_SIMD_CLONES void SoftmaxTileT(Scratch& sc, int32_t mp, int32_t t0, int32_t n, int32_t hd) {
  float* __restrict tmax = sc.tmax;
  float* __restrict alpha = sc.alpha;
  float* __restrict mx = sc.mx;
  float* __restrict sum = sc.sum;
  const int32_t* __restrict limit = sc.limit.data();
  std::fill(tmax, tmax + mp, kNegInf);
  for (int32_t j = 0; j < n; ++j) {
    float* __restrict s = sc.s + int64_t{j} * mp;
    const int32_t pos = t0 + j;
#pragma omp simd
    for (int32_t r = 0; r < mp; ++r) {
      const float v = Select(pos <= limit[r], s[r], kNegInf);
      s[r] = v;
      tmax[r] = Select(v > tmax[r], v, tmax[r]);
    }
  }
#pragma omp simd
  for (int32_t r = 0; r < mp; ++r) {
    const float m_new = Select(tmax[r] > mx[r], tmax[r], mx[r]);
    // Both -inf (nothing seen yet): keep alpha 1 and subtract 0 below.
    alpha[r] = FastExp(Select(m_new == kNegInf, 0.0f, mx[r] - m_new));
    mx[r] = m_new;
    sum[r] *= alpha[r];
    tmax[r] = Select(m_new == kNegInf, 0.0f, m_new);  // what scores subtract
  }
  for (int32_t r = 0; r < mp; ++r) {
    if (alpha[r] == 1.0f) continue;
    float* __restrict a = sc.acc + int64_t{r} * hd;
    const float al = alpha[r];
#pragma omp simd
    for (int32_t d = 0; d < hd; ++d) a[d] *= al;
  }
  for (int32_t j = 0; j < n; ++j) {
    float* __restrict s = sc.s + int64_t{j} * mp;
#pragma omp simd
    for (int32_t r = 0; r < mp; ++r) {
      const float p = FastExp(s[r] - tmax[r]);
      s[r] = p;
      sum[r] += p;
    }
  }
}

// acc[r][:] += sum_j P^T[j][r] * V_j for every key of the pieces.
FOLIO_SIMD_CLONES void ValuesTileT(const float* pt, int32_t mp, const float* v,
                                   const TilePiece* pieces, int32_t np, int32_t t0, int32_t hd,
                                   float* acc) {
  for (int32_t r = 0; r < mp; r += 4) {
    float* c0 = acc + int64_t{r} * hd;
    float* c1 = c0 + hd;
    float* c2 = c1 + hd;
    float* c3 = c2 + hd;
    int32_t d = 0;
    for (; d + 16 <= hd; d += 16) {
      V8 a00 = LoadV8(c0 + d), a01 = LoadV8(c0 + d + 8);
      V8 a10 = LoadV8(c1 + d), a11 = LoadV8(c1 + d + 8);
      V8 a20 = LoadV8(c2 + d), a21 = LoadV8(c2 + d + 8);
      V8 a30 = LoadV8(c3 + d), a31 = LoadV8(c3 + d + 8);
      for (int32_t i = 0; i < np; ++i) {
        const TilePiece& pc = pieces[i];
        const float* vr = v + pc.off + d;
        const float* p = pt + int64_t{pc.pos - t0} * mp + r;
        for (int32_t j = 0; j < pc.run; ++j, vr += hd, p += mp) {
          const V8 v0 = LoadV8(vr), v1 = LoadV8(vr + 8);
          a00 += p[0] * v0, a01 += p[0] * v1;
          a10 += p[1] * v0, a11 += p[1] * v1;
          a20 += p[2] * v0, a21 += p[2] * v1;
          a30 += p[3] * v0, a31 += p[3] * v1;
        }
      }
      StoreV8(c0 + d, a00), StoreV8(c0 + d + 8, a01);
      StoreV8(c1 + d, a10), StoreV8(c1 + d + 8, a11);
      StoreV8(c2 + d, a20), StoreV8(c2 + d + 8, a21);
      StoreV8(c3 + d, a30), StoreV8(c3 + d + 8, a31);
    }
    for (; d < hd; ++d) {  // head_dim not a multiple of 16
      float s0 = c0[d], s1 = c1[d], s2 = c2[d], s3 = c3[d];
      for (int32_t i = 0; i < np; ++i) {
        const TilePiece& pc = pieces[i];
        const float* vr = v + pc.off + d;
        const float* p = pt + int64_t{pc.pos - t0} * mp + r;
        for (int32_t j = 0; j < pc.run; ++j, vr += hd, p += mp) {
          s0 += p[0] * *vr, s1 += p[1] * *vr, s2 += p[2] * *vr, s3 += p[3] * *vr;
        }
      }
      c0[d] = s0, c1[d] = s1, c2[d] = s2, c3[d] = s3;
    }
  }
}

// Attends the mp rows of sc (Q^T in sc.q, limits in sc.limit) to positions
// [begin, end) of src (one KV head), tile by tile.
template <class Src>
void AttendRangeTiled(const Src& src, Scratch& sc, int32_t mp, int32_t begin, int32_t end) {
  const int32_t hd = src.hd;
  TilePiece pieces[kTileTokens];
  for (int32_t t0 = begin; t0 < end; t0 += kTileTokens) {
    const int32_t stop = std::min(end, t0 + kTileTokens);
    int32_t np = 0;
    for (int32_t p = t0; p < stop; ++np) {
      int32_t run;
      const int64_t off = src.Locate(p, &run);
      run = std::min(run, stop - p);
      pieces[np] = {off, p, run};
      p += run;
    }
    ScoresTileT(sc.q, mp, src.k, pieces, np, t0, hd, sc.s);
    SoftmaxTileT(sc, mp, t0, stop - t0, hd);
    ValuesTileT(sc.s, mp, src.v, pieces, np, t0, hd, sc.acc);
  }
}
#endif  // __GNUC__

// Runs fn(item, scratch) for item in [0, n) on the OpenMP threads (dynamic
// schedule: items differ in cost), each thread with its own scratch.
// Small jobs (macs: a rough cost) stay on the calling thread.
template <class Fn>
void ForEachItem(int64_t n, double macs, int32_t max_rows, int32_t hd, Fn fn) {
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

int32_t MaxThreads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// KV heads per decode work item: all of a sequence's heads when there are
// enough sequences to keep the threads busy (a block's heads are adjacent in
// memory, so the item streams through whole blocks), fewer otherwise.
int32_t HeadsPerItem(const Shape& sh) {
  const int64_t wanted = 4 * int64_t{MaxThreads()};
  int32_t heads = sh.num_kv_heads;
  while (heads > 1 && int64_t{sh.num_seqs} * (sh.num_kv_heads / heads) < wanted) {
    do {
      --heads;
    } while (sh.num_kv_heads % heads != 0);
  }
  return heads;
}

// Decode with `heads` KV heads per work item; partition_tokens > 0 splits
// every context into slices of that many positions (separate items, merged
// at the end with a softmax rescale: vLLM's paged_attention_v2).
template <class SourceAt>
void Decode(const float* q, const Shape& sh, const int32_t* context_lens, float scale,
            int32_t heads, int32_t partition_tokens, float* out, SourceAt source_at) {
  const int32_t g = sh.group();
  const int32_t hd = sh.hd;
  const int32_t chunks = sh.num_kv_heads / heads;
  const int32_t m = heads * g;
  const bool partitioned = partition_tokens > 0;
  // Slices: (sequence, slice index); one per sequence when not partitioned.
  // A sequence with context 0 gets one empty slice.
  std::vector<int32_t> first_part(sh.num_seqs + 1, 0);
  for (int32_t s = 0; s < sh.num_seqs; ++s) {
    const int32_t parts =
        partitioned ? std::max(1, (context_lens[s] + partition_tokens - 1) / partition_tokens) : 1;
    first_part[s + 1] = first_part[s] + parts;
  }
  const int32_t num_parts = first_part[sh.num_seqs];
  std::vector<int32_t> part_seq(num_parts);
  for (int32_t s = 0; s < sh.num_seqs; ++s) {
    std::fill(part_seq.begin() + first_part[s], part_seq.begin() + first_part[s + 1], s);
  }
  // Partitioned: partial state of (slice, query head) at slice * num_heads +
  // head: running max, running sum and acc[hd].
  const int64_t partial_rows = partitioned ? int64_t{num_parts} * sh.num_heads : 0;
  std::vector<float> part_max(partial_rows), part_sum(partial_rows), part_acc(partial_rows * hd);
  double macs = 0;
  for (int32_t s = 0; s < sh.num_seqs; ++s) macs += 2.0 * context_lens[s] * sh.num_heads * hd;

  const int64_t items = int64_t{num_parts} * chunks;
  ForEachItem(items, macs, m, hd, [&](int64_t item, Scratch& sc) {
    const int32_t part = static_cast<int32_t>(item / chunks);
    const int32_t h = static_cast<int32_t>(item % chunks) * heads;
    const int32_t s = part_seq[part];
    const int32_t len = context_lens[s];
    const int32_t begin = partitioned ? (part - first_part[s]) * partition_tokens : 0;
    const int32_t end = partitioned ? std::min(len, begin + partition_tokens) : len;
    const int64_t head0 = int64_t{h} * g;  // first query head of the item
    const int64_t row0 = (int64_t{s} * sh.num_heads + head0) * hd;
    sc.Reset(m, hd);
    for (int32_t r = 0; r < m; ++r) {
      LoadQueryRow(q + row0 + int64_t{r} * hd, scale, hd, sc.q + int64_t{r} * hd);
      sc.limit[r] = len - 1;
    }
    AttendRange(source_at(s, h), sc, heads, g, begin, end);
    if (!partitioned) {
      for (int32_t r = 0; r < m; ++r) {
        StoreOutputRow(sc.acc + int64_t{r} * hd, sc.sum[r], hd, out + row0 + int64_t{r} * hd);
      }
      return;
    }
    const int64_t prow = int64_t{part} * sh.num_heads + head0;
    std::copy(sc.mx, sc.mx + m, part_max.begin() + prow);
    std::copy(sc.sum, sc.sum + m, part_sum.begin() + prow);
    std::copy(sc.acc, sc.acc + int64_t{m} * hd, part_acc.begin() + prow * hd);
  });
  if (!partitioned) return;

  // Merge: out = sum_p acc_p * e^(max_p - M) / sum_p sum_p * e^(max_p - M).
  const int64_t out_rows = int64_t{sh.num_seqs} * sh.num_heads;
  [[maybe_unused]] const bool parallel = out_rows * hd * 4 >= (1 << 16);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t orow = 0; orow < out_rows; ++orow) {
    const int32_t s = static_cast<int32_t>(orow / sh.num_heads);
    const int32_t head = static_cast<int32_t>(orow % sh.num_heads);
    float* __restrict o = out + orow * hd;
    float m_all = kNegInf;
    for (int32_t p = first_part[s]; p < first_part[s + 1]; ++p) {
      m_all = std::max(m_all, part_max[int64_t{p} * sh.num_heads + head]);
    }
    std::fill(o, o + hd, 0.0f);
    if (m_all == kNegInf) continue;  // empty context
    float total = 0.0f;
    for (int32_t p = first_part[s]; p < first_part[s + 1]; ++p) {
      const int64_t prow = int64_t{p} * sh.num_heads + head;
      if (part_max[prow] == kNegInf) continue;
      const float w = std::exp(part_max[prow] - m_all);
      total += part_sum[prow] * w;
      const float* __restrict a = part_acc.data() + prow * hd;
#pragma omp simd
      for (int32_t d = 0; d < hd; ++d) o[d] += w * a[d];
    }
    const float inv = 1.0f / total;
#pragma omp simd
    for (int32_t d = 0; d < hd; ++d) o[d] *= inv;
  }
}

template <class SourceAt>
void Prefill(const float* q, const Shape& sh, const int32_t* query_start,
             const int32_t* context_lens, float scale, float* out, SourceAt source_at) {
  const int32_t g = sh.group();
  const int32_t hd = sh.hd;
  // Query tiles: up to kMaxRows rows (tokens x group heads) per item.
  constexpr int32_t kMaxRows = 32;
  const int32_t tile_queries = std::max(1, kMaxRows / g);
  struct Tile {
    int32_t seq, first, last;  // query indices [first, last) within the sequence
  };
  std::vector<Tile> tiles;
  double macs = 0;
  for (int32_t s = 0; s < sh.num_seqs; ++s) {
    const int32_t qlen = query_start[s + 1] - query_start[s];
    const int32_t past = context_lens[s] - qlen;
    for (int32_t i = 0; i < qlen; i += tile_queries) {
      tiles.push_back({s, i, std::min(qlen, i + tile_queries)});
    }
    macs += 2.0 * qlen * (past + qlen / 2.0 + 1) * sh.num_heads * hd;
  }
  // Costlier tiles (later queries see more keys) are pushed last; hand them
  // out first.
  std::reverse(tiles.begin(), tiles.end());
  const int64_t items = static_cast<int64_t>(tiles.size()) * sh.num_kv_heads;
#ifdef FOLIO_TILED_PREFILL
  // Items of at least kMinTiledRows rows take the tiled path (a decode in a
  // mixed batch has only g rows: padding them to 16 would waste the work).
  constexpr int32_t kMinTiledRows = 8;
  const int32_t max_rows = (tile_queries * g + kRowPad - 1) / kRowPad * kRowPad;
#else
  const int32_t max_rows = tile_queries * g;
#endif
  ForEachItem(items, macs, max_rows, hd, [&](int64_t item, Scratch& sc) {
    const Tile& tile = tiles[item / sh.num_kv_heads];
    const int32_t h = static_cast<int32_t>(item % sh.num_kv_heads);
    const int32_t s = tile.seq;
    const int32_t past = context_lens[s] - (query_start[s + 1] - query_start[s]);
    const int32_t m = (tile.last - tile.first) * g;
#ifdef FOLIO_TILED_PREFILL
    if (m >= kMinTiledRows) {
      const int32_t mp = (m + kRowPad - 1) / kRowPad * kRowPad;
      sc.Reset(mp, hd);
      // Q^T, scaled: sc.q[d * mp + r]; padded rows are zero and see nothing.
      for (int32_t i = tile.first; i < tile.last; ++i) {
        const int64_t row0 = ((int64_t{query_start[s]} + i) * sh.num_heads + int64_t{h} * g) * hd;
        for (int32_t j = 0; j < g; ++j) {
          const int32_t r = (i - tile.first) * g + j;
          const float* src = q + row0 + int64_t{j} * hd;
          for (int32_t d = 0; d < hd; ++d) sc.q[int64_t{d} * mp + r] = src[d] * scale;
          sc.limit[r] = past + i;
        }
      }
      for (int32_t r = m; r < mp; ++r) {
        for (int32_t d = 0; d < hd; ++d) sc.q[int64_t{d} * mp + r] = 0.0f;
        sc.limit[r] = -1;
      }
      AttendRangeTiled(source_at(s, h), sc, mp, 0, past + tile.last);
      for (int32_t i = tile.first; i < tile.last; ++i) {
        const int64_t row0 = ((int64_t{query_start[s]} + i) * sh.num_heads + int64_t{h} * g) * hd;
        for (int32_t j = 0; j < g; ++j) {
          const int32_t r = (i - tile.first) * g + j;
          StoreOutputRow(sc.acc + int64_t{r} * hd, sc.sum[r], hd, out + row0 + int64_t{j} * hd);
        }
      }
      return;
    }
#endif
    sc.Reset(m, hd);
    for (int32_t i = tile.first; i < tile.last; ++i) {
      const int64_t row0 = ((int64_t{query_start[s]} + i) * sh.num_heads + int64_t{h} * g) * hd;
      for (int32_t j = 0; j < g; ++j) {
        const int32_t r = (i - tile.first) * g + j;
        LoadQueryRow(q + row0 + int64_t{j} * hd, scale, hd, sc.q + int64_t{r} * hd);
        sc.limit[r] = past + i;
      }
    }
    AttendRange(source_at(s, h), sc, 1, m, 0, past + tile.last);
    for (int32_t i = tile.first; i < tile.last; ++i) {
      const int64_t row0 = ((int64_t{query_start[s]} + i) * sh.num_heads + int64_t{h} * g) * hd;
      for (int32_t j = 0; j < g; ++j) {
        const int32_t r = (i - tile.first) * g + j;
        StoreOutputRow(sc.acc + int64_t{r} * hd, sc.sum[r], hd, out + row0 + int64_t{j} * hd);
      }
    }
  });
}

// Resolves a DecodeSplit (0 = automatic) and decodes. Automatic: contexts
// are sliced (512 positions) only when there are too few (sequence, KV
// head) pairs to keep the threads busy and contexts are long; heads per
// item from HeadsPerItem.
template <class SourceAt>
void DecodeWithSplit(const float* q, const Shape& sh, const int32_t* context_lens, float scale,
                     const DecodeSplit& split, float* out, SourceAt source_at) {
  int32_t partition = split.partition_tokens;
  if (partition == 0) {
    int32_t max_len = 0;
    for (int32_t s = 0; s < sh.num_seqs; ++s) max_len = std::max(max_len, context_lens[s]);
    const bool few_items = int64_t{sh.num_seqs} * sh.num_kv_heads < 2 * int64_t{MaxThreads()};
    partition = few_items && max_len >= 2 * kDefaultPartitionTokens ? kDefaultPartitionTokens : -1;
  }
  const int32_t heads = split.heads_per_item > 0 ? split.heads_per_item : HeadsPerItem(sh);
  Decode(q, sh, context_lens, scale, heads, partition, out, source_at);
}

auto PagedSourceAt(const PagedKvLayer& kv, const BlockTables& tables) {
  return [&kv, &tables](int32_t s, int32_t h) {
    const int64_t tile = int64_t{kv.block_size} * kv.head_dim;
    return PagedSource{kv.k,
                       kv.v,
                       tables.ids + int64_t{s} * tables.max_blocks_per_seq,
                       kv.num_kv_heads * tile,
                       h * tile,
                       tile,
                       kv.block_size,
                       kv.head_dim};
  };
}

auto ContiguousSourceAt(const ContiguousKvLayer& kv) {
  return [&kv](int32_t s, int32_t h) {
    const int64_t base = (int64_t{s} * kv.num_kv_heads + h) * kv.max_seq_len * int64_t{kv.head_dim};
    return ContiguousSource{kv.k, kv.v, base, int64_t{kv.max_seq_len} * kv.head_dim, kv.head_dim};
  };
}

}  // namespace

int32_t KernelThreads() { return MaxThreads(); }

bool ValidateDecodeSplit(const DecodeSplit& split, int32_t num_kv_heads, std::string* error) {
  if (split.heads_per_item < 0 || split.heads_per_item > num_kv_heads ||
      (split.heads_per_item > 0 && num_kv_heads % split.heads_per_item != 0)) {
    return Fail(error, "heads_per_item " + std::to_string(split.heads_per_item) +
                           " does not divide num_kv_heads " + std::to_string(num_kv_heads));
  }
  if (split.partition_tokens < -1) {
    return Fail(error, "partition_tokens " + std::to_string(split.partition_tokens) + " < -1");
  }
  return true;
}

void PagedAttentionDecode(const float* q, const PagedKvLayer& kv, const BlockTables& tables,
                          const int32_t* context_lens, int32_t num_heads, float scale, float* out) {
  PagedAttentionDecodeSplit(q, kv, tables, context_lens, num_heads, scale, DecodeSplit{}, out);
}

void PagedAttentionDecodeSplit(const float* q, const PagedKvLayer& kv, const BlockTables& tables,
                               const int32_t* context_lens, int32_t num_heads, float scale,
                               const DecodeSplit& split, float* out) {
  const Shape sh{tables.num_seqs, num_heads, kv.num_kv_heads, kv.head_dim};
  DecodeWithSplit(q, sh, context_lens, scale, split, out, PagedSourceAt(kv, tables));
}

void PagedAttentionPrefill(const float* q, const PagedKvLayer& kv, const BlockTables& tables,
                           const int32_t* query_start, const int32_t* context_lens,
                           int32_t num_heads, float scale, float* out) {
  const Shape sh{tables.num_seqs, num_heads, kv.num_kv_heads, kv.head_dim};
  Prefill(q, sh, query_start, context_lens, scale, out, PagedSourceAt(kv, tables));
}

void ContiguousAttentionDecode(const float* q, const ContiguousKvLayer& kv,
                               const int32_t* context_lens, int32_t num_heads, float scale,
                               float* out) {
  const Shape sh{kv.num_seqs, num_heads, kv.num_kv_heads, kv.head_dim};
  DecodeWithSplit(q, sh, context_lens, scale, DecodeSplit{}, out, ContiguousSourceAt(kv));
}

void ContiguousAttentionPrefill(const float* q, const ContiguousKvLayer& kv,
                                const int32_t* query_start, const int32_t* context_lens,
                                int32_t num_heads, float scale, float* out) {
  const Shape sh{kv.num_seqs, num_heads, kv.num_kv_heads, kv.head_dim};
  Prefill(q, sh, query_start, context_lens, scale, out, ContiguousSourceAt(kv));
}

}  // namespace cpu
}  // namespace folio::kernels
