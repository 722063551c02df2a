#include "kernels/cpu/packed_gemm.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "common/dtype.h"  // header-only: bf16 rounding shared with the loaders
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/threads.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FOLIO_PACKED_GEMM_AVX2 1
#define FOLIO_AVX2_FMA __attribute__((target("avx2,fma")))
#define FOLIO_AVX512 __attribute__((target("avx512f,fma")))
#endif

namespace folio::kernels::cpu {
namespace {

using folio::Bf16ToFloat;
using folio::FloatToBf16;

constexpr int32_t kP = PackedMatrix::kPanelRows;
// Rows of x per block (the x block, kMc x kKc floats, stays in L2) and the
// k-slice each panel is cut into when several row tiles reuse it (a fp32
// slice is 16 KiB and stays in L1 while every row tile of the block reads it).
constexpr int32_t kMc = 96;
constexpr int32_t kKc = 256;
constexpr int32_t kMaxRowsPerTile = 6;
constexpr int32_t kMaxPanelsPerTile = 4;
// Products smaller than this (multiply-adds) run on the calling thread.
constexpr double kMinParallelMacs = 1 << 16;

// Where column j of a 16-group sits in a bf16 panel: the AVX2 kernel widens
// 16 stored values with unpacklo/unpackhi_epi16, which take stored 0-3 and
// 8-11 into one register and 4-7, 12-15 into the other.
constexpr int32_t Bf16Slot(int32_t j) { return j < 8 ? (j < 4 ? j : j + 4) : (j < 12 ? j - 4 : j); }

// One row tile x one panel group: tile[m][p * 16 + j] = the k-slice's sum.
// w points at the first panel's k-slice; panels are panel_bytes apart.
// prefetch_bytes: how far ahead in each panel to prefetch (0: not at all).
using MicroFn = void (*)(const float* x, int64_t ldx, const uint8_t* w, int64_t panel_bytes,
                         int32_t kc, int64_t prefetch_bytes, float* tile);

template <WeightType T>
constexpr int32_t kBytes = T == WeightType::kFloat32 ? 4 : T == WeightType::kBFloat16 ? 2 : 1;

// ---- portable kernels: plain loops, any CPU ----

template <WeightType T>
inline float Weight(const uint8_t* at_k, int32_t j) {
  if constexpr (T == WeightType::kFloat32) {
    float v;
    std::memcpy(&v, at_k + 4 * j, 4);
    return v;
  } else if constexpr (T == WeightType::kBFloat16) {
    uint16_t h;
    std::memcpy(&h, at_k + 2 * Bf16Slot(j), 2);
    return Bf16ToFloat(h);
  } else {
    return static_cast<float>(static_cast<int8_t>(at_k[j]));
  }
}

template <WeightType T, int MR, int NP>
void MicroPortable(const float* x, int64_t ldx, const uint8_t* w, int64_t panel_bytes, int32_t kc,
                   int64_t /*prefetch_bytes*/, float* tile) {
  float acc[MR][NP * kP] = {};
  for (int32_t k = 0; k < kc; ++k) {
    for (int p = 0; p < NP; ++p) {
      const uint8_t* at = w + p * panel_bytes + int64_t{k} * kP * kBytes<T>;
      float wk[kP];
      for (int32_t j = 0; j < kP; ++j) wk[j] = Weight<T>(at, j);
      for (int m = 0; m < MR; ++m) {
        const float xv = x[m * ldx + k];
        for (int32_t j = 0; j < kP; ++j) acc[m][p * kP + j] += xv * wk[j];
      }
    }
  }
  std::memcpy(tile, acc, sizeof(acc));
}

// ---- AVX2 + FMA kernels: 16 outputs per panel in two registers ----

#ifdef FOLIO_PACKED_GEMM_AVX2
template <WeightType T>
FOLIO_AVX2_FMA inline __attribute__((always_inline)) void Load16(const uint8_t* p, __m256& lo,
                                                                 __m256& hi) {
  if constexpr (T == WeightType::kFloat32) {
    lo = _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    hi = _mm256_loadu_ps(reinterpret_cast<const float*>(p) + 8);
  } else if constexpr (T == WeightType::kBFloat16) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i zero = _mm256_setzero_si256();
    lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, v));
    hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, v));
  } else {
    lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
    hi = _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8))));
  }
}

// kPackedX: x is the row tile packed by PackRowTiles (x[k * MR + m]), read as
// one stream; else rows of x are ldx floats apart.
template <WeightType T, int MR, int NP, bool kPackedX = false>
FOLIO_AVX2_FMA void MicroAvx2(const float* x, int64_t ldx, const uint8_t* w, int64_t panel_bytes,
                              int32_t kc, int64_t prefetch_bytes, float* tile) {
  __m256 acc[MR][NP][2];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) acc[m][p][0] = acc[m][p][1] = _mm256_setzero_ps();
  }
  constexpr int64_t kStep = int64_t{kP} * kBytes<T>;
  // Four k-steps a loop trip: the loop's own instructions (counter, branch,
  // prefetch test) otherwise take issue slots from the FMAs (measured: +25%
  // GFLOP/s at 32-256 rows on a Zen 3 class CPU).
#pragma GCC unroll 4
  for (int32_t k = 0; k < kc; ++k) {
    __m256 lo[NP], hi[NP];
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      const uint8_t* at = w + p * panel_bytes + k * kStep;
      // One line per 64 bytes of panel: every k for fp32, every 2nd / 4th for bf16 / int8.
      if (prefetch_bytes != 0 && (k * kStep) % 64 == 0) {
        _mm_prefetch(reinterpret_cast<const char*>(at + prefetch_bytes), _MM_HINT_T0);
      }
      Load16<T>(at, lo[p], hi[p]);
    }
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      const __m256 xv = _mm256_broadcast_ss(kPackedX ? x + k * MR + m : x + m * ldx + k);
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) {
        acc[m][p][0] = _mm256_fmadd_ps(xv, lo[p], acc[m][p][0]);
        acc[m][p][1] = _mm256_fmadd_ps(xv, hi[p], acc[m][p][1]);
      }
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      _mm256_storeu_ps(tile + (m * NP + p) * kP, acc[m][p][0]);
      _mm256_storeu_ps(tile + (m * NP + p) * kP + 8, acc[m][p][1]);
    }
  }
}

// One row, one panel: the panel is read front to back as a single stream
// (what the hardware prefetcher follows best), with four k-steps in flight
// on separate accumulators so the FMA latency does not serialize them.
template <WeightType T>
FOLIO_AVX2_FMA void RowAvx2(const float* x, int64_t /*ldx*/, const uint8_t* w,
                            int64_t /*panel_bytes*/, int32_t kc, int64_t prefetch_bytes,
                            float* tile) {
  constexpr int64_t kStep = int64_t{kP} * kBytes<T>;
  __m256 lo[4], hi[4];
#pragma GCC unroll 4
  for (int u = 0; u < 4; ++u) lo[u] = hi[u] = _mm256_setzero_ps();
  int32_t k = 0;
  for (; k + 4 <= kc; k += 4) {
    if (prefetch_bytes != 0) {
#pragma GCC unroll 4
      for (int64_t b = 0; b < 4 * kStep; b += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(w + k * kStep + b + prefetch_bytes), _MM_HINT_T0);
      }
    }
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      __m256 a, b;
      Load16<T>(w + (k + u) * kStep, a, b);
      const __m256 xv = _mm256_broadcast_ss(x + k + u);
      lo[u] = _mm256_fmadd_ps(xv, a, lo[u]);
      hi[u] = _mm256_fmadd_ps(xv, b, hi[u]);
    }
  }
  for (; k < kc; ++k) {
    __m256 a, b;
    Load16<T>(w + k * kStep, a, b);
    const __m256 xv = _mm256_broadcast_ss(x + k);
    lo[0] = _mm256_fmadd_ps(xv, a, lo[0]);
    hi[0] = _mm256_fmadd_ps(xv, b, hi[0]);
  }
  _mm256_storeu_ps(tile, _mm256_add_ps(_mm256_add_ps(lo[0], lo[1]), _mm256_add_ps(lo[2], lo[3])));
  _mm256_storeu_ps(tile + 8, _mm256_add_ps(_mm256_add_ps(hi[0], hi[1]), _mm256_add_ps(hi[2], hi[3])));
}

// ---- AVX-512 kernels: 16 outputs per panel in one register, 32 registers ----

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the merge operand
// of their unmasked builtins, which -Wmaybe-uninitialized reports as "'__Y'
// may be used uninitialized" wherever one is inlined (GCC bug 105593);
// silenced for these kernels only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

template <WeightType T>
FOLIO_AVX512 inline __attribute__((always_inline)) __m512 Load16x512(const uint8_t* p) {
  if constexpr (T == WeightType::kFloat32) {
    return _mm512_loadu_ps(p);
  } else if constexpr (T == WeightType::kBFloat16) {
    // Lanes come out in stored order; MicroAvx512 puts columns back at the end.
    const __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  } else {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
}

template <WeightType T, int MR, int NP>
FOLIO_AVX512 void MicroAvx512(const float* x, int64_t ldx, const uint8_t* w, int64_t panel_bytes,
                              int32_t kc, int64_t prefetch_bytes, float* tile) {
  __m512 acc[MR][NP];
#pragma GCC unroll 12
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) acc[m][p] = _mm512_setzero_ps();
  }
  constexpr int64_t kStep = int64_t{kP} * kBytes<T>;
  for (int32_t k = 0; k < kc; ++k) {
    __m512 wk[NP];
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      const uint8_t* at = w + p * panel_bytes + k * kStep;
      if (prefetch_bytes != 0 && (k * kStep) % 64 == 0) {
        _mm_prefetch(reinterpret_cast<const char*>(at + prefetch_bytes), _MM_HINT_T0);
      }
      wk[p] = Load16x512<T>(at);
    }
#pragma GCC unroll 12
    for (int m = 0; m < MR; ++m) {
      const __m512 xv = _mm512_set1_ps(x[m * ldx + k]);
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) acc[m][p] = _mm512_fmadd_ps(xv, wk[p], acc[m][p]);
    }
  }
  // bf16: lane s holds the column stored in slot s; column j sits in slot Bf16Slot(j).
  const __m512i columns = _mm512_set_epi32(Bf16Slot(15), Bf16Slot(14), Bf16Slot(13), Bf16Slot(12),
                                           Bf16Slot(11), Bf16Slot(10), Bf16Slot(9), Bf16Slot(8),
                                           Bf16Slot(7), Bf16Slot(6), Bf16Slot(5), Bf16Slot(4),
                                           Bf16Slot(3), Bf16Slot(2), Bf16Slot(1), Bf16Slot(0));
#pragma GCC unroll 12
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      __m512 v = acc[m][p];
      if constexpr (T == WeightType::kBFloat16) v = _mm512_permutexvar_ps(columns, v);
      _mm512_storeu_ps(tile + (m * NP + p) * kP, v);
    }
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif

enum class Isa { kPortable, kAvx2, kAvx512 };

// kernels[np_index][mr - 1], np_index 0/1/2 = 1/2/4 panels, for the tile
// shapes TileShape picks on that instruction set (null elsewhere).
struct KernelTable {
  std::array<std::array<MicroFn, kMaxRowsPerTile>, 3> fn{};
  // AVX2, one panel: the same tiles over x packed by PackRowTiles (else null).
  std::array<MicroFn, kMaxRowsPerTile> packed_x{};
};

template <Isa I, WeightType T, int NP, int... MR>
void FillRow(std::array<MicroFn, kMaxRowsPerTile>& row, std::integer_sequence<int, MR...>) {
#ifdef FOLIO_PACKED_GEMM_AVX2
  if constexpr (I == Isa::kAvx512) {
    ((row[MR] = &MicroAvx512<T, MR + 1, NP>), ...);
    return;
  } else if constexpr (I == Isa::kAvx2) {
    ((row[MR] = &MicroAvx2<T, MR + 1, NP>), ...);
    if constexpr (NP == 1) row[0] = &RowAvx2<T>;
    return;
  }
#endif
  ((row[MR] = &MicroPortable<T, MR + 1, NP>), ...);
}

template <Isa I, WeightType T>
KernelTable MakeTable() {
  KernelTable t;
  if constexpr (I == Isa::kAvx512) {
    FillRow<I, T, 1>(t.fn[0], std::make_integer_sequence<int, 6>{});
    FillRow<I, T, 4>(t.fn[2], std::make_integer_sequence<int, 6>{});
  } else {
    FillRow<I, T, 1>(t.fn[0], std::make_integer_sequence<int, 6>{});
    FillRow<I, T, 2>(t.fn[1], std::make_integer_sequence<int, 3>{});
#ifdef FOLIO_PACKED_GEMM_AVX2
    if constexpr (I == Isa::kAvx2) {
      [&]<int... MR>(std::integer_sequence<int, MR...>) {
        ((t.packed_x[MR] = &MicroAvx2<T, MR + 1, 1, true>), ...);
      }(std::make_integer_sequence<int, 6>{});
    }
#endif
  }
  return t;
}

// Tile shape for a block of mc rows: enough independent accumulators to
// hide the FMA latency (8-12 AVX2 registers, 24 of AVX-512's 32),
// few rows reading several panels at once.
struct TileShape {
  int32_t panels, rows;
};
TileShape TileShapeFor(Isa isa, int32_t mc) {
  // AVX-512: 4 panels x 6 rows (4 weight loads and 6 broadcasts per 24 FMAs)
  // ran 90-99 GFLOP/s on one core at 16-256 rows where 2 x 12 ran 60-75.
  if (isa == Isa::kAvx512) return mc <= 3 ? TileShape{4, mc} : TileShape{4, 6};
  if (mc == 1) return {1, 1};
  return mc <= 3 ? TileShape{2, mc} : TileShape{1, 6};
}
int32_t NpIndex(int32_t np) { return np == 4 ? 2 : np == 2 ? 1 : 0; }

std::atomic<int> isa_cap{2};  // SetPackedGemmIsaForTesting: 0 portable, 1 avx2, 2 avx512

Isa BestIsa() {
  const int cap = isa_cap.load(std::memory_order_relaxed);
  if (cap >= 2 && HaveAvx512()) return Isa::kAvx512;
  if (cap >= 1 && HaveAvx2Fma()) return Isa::kAvx2;
  return Isa::kPortable;
}

template <Isa I>
const KernelTable& TableFor(WeightType type) {
  static const KernelTable f32 = MakeTable<I, WeightType::kFloat32>();
  static const KernelTable bf16 = MakeTable<I, WeightType::kBFloat16>();
  static const KernelTable i8 = MakeTable<I, WeightType::kInt8>();
  switch (type) {
    case WeightType::kBFloat16: return bf16;
    case WeightType::kInt8: return i8;
    case WeightType::kFloat32: break;
  }
  return f32;
}

const KernelTable& TableFor(Isa isa, WeightType type) {
  switch (isa) {
    case Isa::kAvx512: return TableFor<Isa::kAvx512>(type);
    case Isa::kAvx2: return TableFor<Isa::kAvx2>(type);
    case Isa::kPortable: break;
  }
  return TableFor<Isa::kPortable>(type);
}

// Row tiles of a block of mc rows: the fewest tiles of at most mr_tile rows
// that cover it, their heights differing by at most one (32 rows: 5 5 6 5 5 6,
// not 6 6 6 6 6 2), so that no tile is left with too few accumulators to
// cover the FMA latency. Tile t holds rows [Start(t), Start(t + 1)).
struct RowTiles {
  int32_t mc, count;
  RowTiles(int32_t mc, int32_t mr_tile) : mc(mc), count((mc + mr_tile - 1) / mr_tile) {}
  int32_t Start(int32_t t) const { return static_cast<int32_t>(int64_t{t} * mc / count); }
};

// Copies rows [0, mc) of x (K floats each) into its row tiles, each stored
// k-major: the value (m, k) of the tile starting at row m0 with r rows sits at
// out[m0 * K + k * r + (m - m0)]. A micro-kernel then reads its tile's x as
// one stream instead of rows K floats apart (with K a multiple of 1024 those
// rows fall into the same L1 sets as each other and the panel).
void PackRowTiles(const float* x, const RowTiles& tiles, int32_t K, float* out) {
  for (int32_t t = 0; t < tiles.count; ++t) {
    const int32_t m = tiles.Start(t), rows = tiles.Start(t + 1) - m;
    float* tile = out + int64_t{m} * K;
    for (int32_t i = 0; i < rows; ++i) {
      const float* row = x + int64_t{m + i} * K;
      for (int32_t k = 0; k < K; ++k) tile[int64_t{k} * rows + i] = row[k];
    }
  }
}

// Panels [p_begin, p_end) of out for all n rows.
void GemmPanels(const float* x, int32_t n, const PackedMatrix& w, int32_t p_begin, int32_t p_end,
                float* out) {
  const Isa isa = BestIsa();
  const KernelTable& table = TableFor(isa, w.type());
  const int32_t K = w.cols(), R = w.rows();
  const int64_t panel_bytes = w.panel_bytes();
  const int64_t k_step = int64_t{kP} * WeightTypeBytes(w.type());
  const float* scales = w.type() == WeightType::kInt8 ? w.scales() : nullptr;
  alignas(64) float tile[kMaxRowsPerTile * kMaxPanelsPerTile * kP];
  thread_local std::vector<float> packed_x;
  for (int32_t m0 = 0; m0 < n; m0 += kMc) {
    const int32_t mc = std::min(kMc, n - m0);
    const TileShape shape = TileShapeFor(isa, mc);
    const int32_t np_tile = shape.panels, mr_tile = shape.rows;
    // Several one-panel row tiles (AVX2): they read x packed tile by tile.
    const bool pack_x = table.packed_x[0] != nullptr && np_tile == 1 && mc > mr_tile;
    const RowTiles tiles(mc, mr_tile);
    if (pack_x) {
      packed_x.resize(size_t(mc) * K);
      PackRowTiles(x + int64_t{m0} * K, tiles, K, packed_x.data());
    }
    // One row tile reads each panel once: no reuse to keep in L1, so no k-slices.
    const int32_t kc_max = mc <= mr_tile ? K : kKc;
    for (int32_t p = p_begin; p < p_end;) {
      const int32_t np = p_end - p >= np_tile ? np_tile : 1;
      for (int32_t k0 = 0; k0 < K; k0 += kc_max) {
        const int32_t kc = std::min(kc_max, K - k0);
        for (int32_t t = 0; t < tiles.count; ++t) {
          const int32_t m = tiles.Start(t), mr = tiles.Start(t + 1) - m;
          // The first row tile of a k-slice pulls the next slice of its
          // panels in while it computes (the others find this one in L1);
          // a whole-panel pass prefetches 1 KiB ahead.
          const int64_t prefetch = m != 0 ? 0 : kc == K ? 1024 : int64_t{kc} * k_step;
          const uint8_t* wp = w.panel(p) + k0 * k_step;
          if (pack_x) {  // one-panel tiles (np == 1)
            const float* xt = packed_x.data() + int64_t{m} * K + int64_t{k0} * mr;
            table.packed_x[mr - 1](xt, 0, wp, panel_bytes, kc, prefetch, tile);
          } else {
            const float* xm = x + int64_t{m0 + m} * K + k0;
            table.fn[NpIndex(np)][mr - 1](xm, K, wp, panel_bytes, kc, prefetch, tile);
          }
          // Epilogue: scale (int8) and store or accumulate the valid columns.
          const int32_t c0 = p * kP, cols = std::min(np * kP, R - c0);
          for (int32_t i = 0; i < mr; ++i) {
            float* o = out + int64_t{m0 + m + i} * R + c0;
            const float* sums = tile + i * np * kP;
            // omp simd: -O2 leaves these loops scalar (their trip count is
            // not a constant), and they run once per tile and k-slice.
            if (scales != nullptr) {
              const float* sc = scales + c0;
              if (k0 == 0) {
#pragma omp simd
                for (int32_t j = 0; j < cols; ++j) o[j] = sums[j] * sc[j];
              } else {
#pragma omp simd
                for (int32_t j = 0; j < cols; ++j) o[j] += sums[j] * sc[j];
              }
            } else if (k0 == 0) {
              std::memcpy(o, sums, sizeof(float) * cols);
            } else {
#pragma omp simd
              for (int32_t j = 0; j < cols; ++j) o[j] += sums[j];
            }
          }
        }
      }
      p += np;
    }
  }
}

}  // namespace

std::string_view WeightTypeName(WeightType type) {
  switch (type) {
    case WeightType::kBFloat16: return "bfloat16";
    case WeightType::kInt8: return "int8";
    case WeightType::kFloat32: break;
  }
  return "float32";
}

int32_t WeightTypeBytes(WeightType type) {
  switch (type) {
    case WeightType::kBFloat16: return 2;
    case WeightType::kInt8: return 1;
    case WeightType::kFloat32: break;
  }
  return 4;
}

void PackedMatrix::FreeAligned::operator()(uint8_t* p) const { std::free(p); }

PackedMatrix PackedMatrix::Pack(const float* w, int32_t rows, int32_t cols, WeightType type) {
  PackedMatrix m;
  m.rows_ = rows;
  m.cols_ = cols;
  m.type_ = type;
  const int32_t panels = m.num_panels();
  const int64_t bytes = int64_t{panels} * m.panel_bytes();
  m.data_.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
  std::memset(m.data_.get(), 0, bytes);
  if (type == WeightType::kInt8) {
    m.scales_.assign(size_t(panels) * kP, 0.0f);
    for (int32_t r = 0; r < rows; ++r) {
      float max_abs = 0;
      for (int32_t k = 0; k < cols; ++k) max_abs = std::max(max_abs, std::fabs(w[int64_t{r} * cols + k]));
      m.scales_[r] = max_abs / 127.0f;
    }
  }
  for (int32_t p = 0; p < panels; ++p) {
    uint8_t* panel = m.data_.get() + int64_t{p} * m.panel_bytes();
    const int32_t valid = std::min(kP, rows - p * kP);
    for (int32_t j = 0; j < valid; ++j) {
      const int32_t r = p * kP + j;
      const float* src = w + int64_t{r} * cols;
      const float inv = type == WeightType::kInt8 && m.scales_[r] > 0 ? 1.0f / m.scales_[r] : 0.0f;
      for (int32_t k = 0; k < cols; ++k) {
        uint8_t* at = panel + int64_t{k} * kP * WeightTypeBytes(type);
        switch (type) {
          case WeightType::kFloat32:
            std::memcpy(at + 4 * j, &src[k], 4);
            break;
          case WeightType::kBFloat16: {
            const uint16_t h = FloatToBf16(src[k]);
            std::memcpy(at + 2 * Bf16Slot(j), &h, 2);
            break;
          }
          case WeightType::kInt8:
            at[j] = static_cast<uint8_t>(static_cast<int8_t>(
                std::clamp(std::nearbyint(src[k] * inv), -127.0f, 127.0f)));
            break;
        }
      }
    }
  }
  return m;
}

int64_t PackedMatrix::bytes() const {
  return int64_t{num_panels()} * panel_bytes() + int64_t(scales_.size() * sizeof(float));
}

void PackedMatrix::Row(int32_t r, float* out) const {
  const uint8_t* base = panel(r / kP);
  const int32_t j = r % kP;
  const int64_t step = int64_t{kP} * WeightTypeBytes(type_);
  for (int32_t k = 0; k < cols_; ++k) {
    const uint8_t* at = base + k * step;
    switch (type_) {
      case WeightType::kFloat32: out[k] = Weight<WeightType::kFloat32>(at, j); break;
      case WeightType::kBFloat16: out[k] = Weight<WeightType::kBFloat16>(at, j); break;
      case WeightType::kInt8: out[k] = Weight<WeightType::kInt8>(at, j) * scales_[r]; break;
    }
  }
}

void PackedGemm(const float* x, int32_t n, const PackedMatrix& w, float* out) {
  if (n <= 0 || w.empty()) return;
  const int32_t panels = w.num_panels();
  const int32_t threads = std::min(KernelThreads(), panels);
  if (threads <= 1 || double(n) * w.rows() * w.cols() < kMinParallelMacs) {
    GemmPanels(x, n, w, 0, panels, out);
    return;
  }
  // Contiguous panel ranges, one per thread: each weight byte is read by one
  // thread only, and every thread reads all of x.
  ParallelFor(threads, [&](int64_t t) {
    const int32_t lo = static_cast<int32_t>(int64_t{panels} * t / threads);
    const int32_t hi = static_cast<int32_t>(int64_t{panels} * (t + 1) / threads);
    if (hi > lo) GemmPanels(x, n, w, lo, hi, out);
  });
}

std::string_view PackedGemmIsa() {
  switch (BestIsa()) {
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    case Isa::kPortable: break;
  }
  return "portable";
}

std::vector<std::string> PackedGemmIsas() {
  std::vector<std::string> out = {"portable"};
  if (HaveAvx2Fma()) out.push_back("avx2");
  if (HaveAvx512()) out.push_back("avx512");
  return out;
}

void SetPackedGemmIsaForTesting(std::string_view isa) {
  isa_cap.store(isa == "portable" ? 0 : isa == "avx2" ? 1 : 2);
}

}  // namespace folio::kernels::cpu
