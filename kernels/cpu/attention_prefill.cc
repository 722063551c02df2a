// PagedAttentionPrefill / ContiguousAttentionPrefill: many query tokens per
// sequence, causal; work items are (sequence, KV head, query tile). Items
// with enough rows take the register-blocked tiled path below, the others
// the generic AttendRange of kernels/cpu/attention_internal.h.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_internal.h"
#include "kernels/cpu/vec_math.h"

namespace folio::kernels::cpu {
namespace {

using namespace attention_internal;  // NOLINT(google-build-using-namespace): private helpers

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
// V8, LoadV8, StoreV8: kernels/cpu/attention_internal.h.
#ifdef FOLIO_ATTENTION_V8
#define FOLIO_TILED_PREFILL 1

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
// row outside its [first, limit], updates running max and sum, rescales acc,
// and turns the scores into probabilities in place.
FOLIO_SIMD_CLONES void SoftmaxTileT(Scratch& sc, int32_t mp, int32_t t0, int32_t n, int32_t hd) {
  float* __restrict tmax = sc.tmax;
  float* __restrict alpha = sc.alpha;
  float* __restrict mx = sc.mx;
  float* __restrict sum = sc.sum;
  const int32_t* __restrict limit = sc.limit.data();
  const int32_t* __restrict first = sc.first.data();
  std::fill(tmax, tmax + mp, kNegInf);
  for (int32_t j = 0; j < n; ++j) {
    float* __restrict s = sc.s + int64_t{j} * mp;
    const int32_t pos = t0 + j;
#pragma omp simd
    for (int32_t r = 0; r < mp; ++r) {
      const float v = Select(pos <= limit[r] && pos >= first[r], s[r], kNegInf);
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

// Attends the mp rows of sc (Q^T in sc.q, ranges in sc.first / sc.limit) to
// positions [begin, end) of src (one KV head), tile by tile.
template <class Src>
void AttendRangeTiled(const Src& src, Scratch& sc, int32_t mp, int32_t begin, int32_t end) {
  const int32_t hd = src.hd;
  WidenScratch(src, sc);
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
    if constexpr (Src::kQuantized) {
      // The tile's keys, then its values, widened into sc.kv ([position][hd]).
      TilePiece widened[kTileTokens];
      for (int32_t i = 0; i < np; ++i) {
        widened[i] = {int64_t{pieces[i].pos - t0} * hd, pieces[i].pos, pieces[i].run};
        PieceKv(src, true, pieces[i].off, pieces[i].pos, pieces[i].run, 0,
                sc.kv.data() + widened[i].off);
      }
      ScoresTileT(sc.q, mp, sc.kv.data(), widened, np, t0, hd, sc.s);
      SoftmaxTileT(sc, mp, t0, stop - t0, hd);
      for (int32_t i = 0; i < np; ++i) {
        PieceKv(src, false, pieces[i].off, pieces[i].pos, pieces[i].run, 0,
                sc.kv.data() + widened[i].off);
      }
      ValuesTileT(sc.s, mp, sc.kv.data(), widened, np, t0, hd, sc.acc);
    } else {
      ScoresTileT(sc.q, mp, src.k, pieces, np, t0, hd, sc.s);
      SoftmaxTileT(sc, mp, t0, stop - t0, hd);
      ValuesTileT(sc.s, mp, src.v, pieces, np, t0, hd, sc.acc);
    }
  }
}
#endif  // __GNUC__

template <class SourceAt>
void Prefill(const float* q, const Shape& sh, const int32_t* query_start,
             const int32_t* context_lens, float scale, int32_t sliding_window, float* out,
             SourceAt source_at) {
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
    const double seen = sliding_window > 0 ? std::min<double>(sliding_window, past + qlen / 2.0 + 1)
                                           : past + qlen / 2.0 + 1;
    macs += 2.0 * qlen * seen * sh.num_heads * hd;
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
    // Keys [begin, end): from the first query's window start to the last query.
    const int32_t begin = FirstVisible(past + tile.first, sliding_window);
    const int32_t end = past + tile.last;
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
          sc.first[r] = FirstVisible(past + i, sliding_window);
        }
      }
      for (int32_t r = m; r < mp; ++r) {
        for (int32_t d = 0; d < hd; ++d) sc.q[int64_t{d} * mp + r] = 0.0f;
        sc.limit[r] = -1;
        sc.first[r] = 0;
      }
      AttendRangeTiled(source_at(s, h), sc, mp, begin, end);
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
        sc.first[r] = FirstVisible(past + i, sliding_window);
      }
    }
    AttendRange(source_at(s, h), sc, 1, m, begin, end);
    for (int32_t i = tile.first; i < tile.last; ++i) {
      const int64_t row0 = ((int64_t{query_start[s]} + i) * sh.num_heads + int64_t{h} * g) * hd;
      for (int32_t j = 0; j < g; ++j) {
        const int32_t r = (i - tile.first) * g + j;
        StoreOutputRow(sc.acc + int64_t{r} * hd, sc.sum[r], hd, out + row0 + int64_t{j} * hd);
      }
    }
  });
}

}  // namespace

void PagedAttentionPrefill(const float* q, const PagedKvLayer& kv, const BlockTables& tables,
                           const int32_t* query_start, const int32_t* context_lens,
                           int32_t num_heads, float scale, float* out, int32_t sliding_window) {
  const Shape sh{tables.num_seqs, num_heads, kv.num_kv_heads, kv.head_dim};
  WithPagedSource(kv, tables, [&](auto source_at) {
    Prefill(q, sh, query_start, context_lens, scale, sliding_window, out, source_at);
  });
}

void ContiguousAttentionPrefill(const float* q, const ContiguousKvLayer& kv,
                                const int32_t* query_start, const int32_t* context_lens,
                                int32_t num_heads, float scale, float* out,
                                int32_t sliding_window) {
  const Shape sh{kv.num_seqs, num_heads, kv.num_kv_heads, kv.head_dim};
  Prefill(q, sh, query_start, context_lens, scale, sliding_window, out, ContiguousSourceAt(kv));
}

}  // namespace folio::kernels::cpu
