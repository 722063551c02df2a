#include "kernels/cuda/sampling.cuh"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

namespace folio::kernels::gpu {
namespace {

constexpr int kPrepareThreads = 512;
constexpr int kFinishThreads = 256;
constexpr int kScanItems = 4;        // contiguous items per thread per scan tile
constexpr int kDrawBatch = 32;       // samples resolved per cumulative-search pass
constexpr size_t kAlign = 256;

enum RowKind : int32_t {
  kNone = 0,        // nothing to draw (top log-probs at most)
  kGreedy = 1,      // argmax, done by PrepareKernel
  kSelectDraw = 2,  // top_k <= kGpuSelectMax: block top-k, then the draw
  kSortDraw = 3,    // full segmented sort, then the draw
  kSelectBeam = 4,  // block top-n of the processed log-softmax
  kSortBeam = 5,    // full sort of the processed log-softmax
};

__host__ __device__ inline bool HasPenalties(const GpuSamplingRow& r) {
  return r.repetition_penalty != 1.0f || r.presence_penalty != 0.0f ||
         r.frequency_penalty != 0.0f;
}

// Whether the logits sampling sees differ from the raw ones (biases or
// penalties): those rows' processed logits live in keys_in.
__host__ __device__ inline bool ProcessesLogits(const GpuSamplingRow& r) {
  return HasPenalties(r) || r.num_biases > 0 || r.allowed_only != 0;
}

__host__ __device__ inline RowKind Classify(const GpuSamplingRow& r, int32_t vocab) {
  if (r.num_samples <= 0) return kNone;
  if (r.mode == static_cast<int32_t>(cpu::SamplingMode::kBeam)) {
    return r.num_samples <= kGpuSelectMax || vocab <= kGpuSelectMax ? kSelectBeam : kSortBeam;
  }
  if (r.temperature == 0.0f) return kGreedy;
  if (r.top_k > 0 && r.top_k < vocab && r.top_k <= kGpuSelectMax) return kSelectDraw;
  return kSortDraw;
}

__host__ __device__ inline bool IsSortKind(RowKind k) { return k == kSortDraw || k == kSortBeam; }

struct RowStats {
  float raw_max;
  float raw_log_sum;
  float pen_max;
  float pen_log_sum;
};

// Where each piece of the workspace lives.
struct Workspace {
  float* keys_in;     // [rows][vocab]: processed logits, then sort keys
  int32_t* vals_in;   // [rows][vocab]: penalty scratch, then sort values (ids)
  float* keys_out;    // [rows][vocab]: sorted keys
  int32_t* vals_out;  // [rows][vocab]: sorted ids
  RowStats* stats;    // [rows]
  int32_t* seg_begin;  // [rows]
  int32_t* seg_end;    // [rows]
  void* cub_temp;
  size_t cub_bytes;
};

size_t AlignUp(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

cudaError_t CubSortBytes(int32_t rows, int32_t vocab, size_t* bytes) {
  *bytes = 0;
  return cub::DeviceSegmentedRadixSort::SortPairsDescending(
      nullptr, *bytes, static_cast<const float*>(nullptr), static_cast<float*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), rows * vocab, rows,
      static_cast<const int32_t*>(nullptr), static_cast<const int32_t*>(nullptr), 0, 32);
}

bool RowsAndVocabOk(int32_t rows, int32_t vocab) {
  return rows >= 1 && rows <= 65535 && vocab >= 1 && int64_t{rows} * vocab <= INT32_MAX;
}

// Carves `base` (any alignment) into the pieces; returns the bytes used.
size_t Layout(int32_t rows, int32_t vocab, size_t cub_bytes, char* base, Workspace* ws) {
  const size_t n = static_cast<size_t>(rows) * vocab;
  size_t off = AlignUp(reinterpret_cast<uintptr_t>(base)) - reinterpret_cast<uintptr_t>(base);
  auto take = [&](size_t bytes) {
    char* p = base + off;
    off = AlignUp(off + bytes);
    return p;
  };
  ws->keys_in = reinterpret_cast<float*>(take(n * sizeof(float)));
  ws->vals_in = reinterpret_cast<int32_t*>(take(n * sizeof(int32_t)));
  ws->keys_out = reinterpret_cast<float*>(take(n * sizeof(float)));
  ws->vals_out = reinterpret_cast<int32_t*>(take(n * sizeof(int32_t)));
  ws->stats = reinterpret_cast<RowStats*>(take(rows * sizeof(RowStats)));
  ws->seg_begin = reinterpret_cast<int32_t*>(take(rows * sizeof(int32_t)));
  ws->seg_end = reinterpret_cast<int32_t*>(take(rows * sizeof(int32_t)));
  ws->cub_temp = take(cub_bytes);
  ws->cub_bytes = cub_bytes;
  return off;
}

// ---------------------------------------------------------------- device --

__device__ inline float NegInf() { return __int_as_float(static_cast<int>(0xff800000u)); }

// CPU's comparator: larger value first, lower id first among equal values.
__device__ inline bool Better(float av, int32_t aid, float bv, int32_t bid) {
  return av > bv || (av == bv && aid < bid);
}

struct Scored {
  float v;
  int32_t id;
};
struct BetterOp {
  __device__ Scored operator()(const Scored& a, const Scored& b) const {
    return Better(a.v, a.id, b.v, b.id) ? a : b;
  }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct MinOp {
  __device__ int32_t operator()(int32_t a, int32_t b) const { return a < b ? a : b; }
};

// Block-wide collectives with the result broadcast to every thread. Each
// call ends with __syncthreads(), so the shared storage can be reused at once.
// Every thread of the CTA must make the same calls.
template <int kThreads>
struct Block {
  using ReduceF = cub::BlockReduce<float, kThreads>;
  using ReduceD = cub::BlockReduce<double, kThreads>;
  using ReduceI = cub::BlockReduce<int32_t, kThreads>;
  using ReduceS = cub::BlockReduce<Scored, kThreads>;
  using ScanD = cub::BlockScan<double, kThreads>;
  struct Shared {
    union {
      typename ReduceF::TempStorage f;
      typename ReduceD::TempStorage d;
      typename ReduceI::TempStorage i;
      typename ReduceS::TempStorage s;
      typename ScanD::TempStorage scan;
    } temp;
    double bcast_d;
    float bcast_f;
    int32_t bcast_i;
    Scored bcast_s;
  };

  __device__ static float Max(float v, Shared& sh) {
    const float r = ReduceF(sh.temp.f).Reduce(v, MaxOp());
    if (threadIdx.x == 0) sh.bcast_f = r;
    __syncthreads();
    const float out = sh.bcast_f;
    __syncthreads();
    return out;
  }
  __device__ static double Sum(double v, Shared& sh) {
    const double r = ReduceD(sh.temp.d).Sum(v);
    if (threadIdx.x == 0) sh.bcast_d = r;
    __syncthreads();
    const double out = sh.bcast_d;
    __syncthreads();
    return out;
  }
  __device__ static int32_t Min(int32_t v, Shared& sh) {
    const int32_t r = ReduceI(sh.temp.i).Reduce(v, MinOp());
    if (threadIdx.x == 0) sh.bcast_i = r;
    __syncthreads();
    const int32_t out = sh.bcast_i;
    __syncthreads();
    return out;
  }
  __device__ static Scored Best(Scored v, Shared& sh) {
    const Scored r = ReduceS(sh.temp.s).Reduce(v, BetterOp());
    if (threadIdx.x == 0) sh.bcast_s = r;
    __syncthreads();
    const Scored out = sh.bcast_s;
    __syncthreads();
    return out;
  }
};

// The log-softmax statistics of value(0..size): max, and log of the sum of
// exp(double(x - max)) as float (as cpu::LogSoftmax).
template <int kThreads, class ValueFn>
__device__ void LogSoftmaxStats(ValueFn value, int32_t size, typename Block<kThreads>::Shared& sh,
                                float* max_out, float* log_sum_out) {
  float m = NegInf();
  for (int32_t i = threadIdx.x; i < size; i += kThreads) m = fmaxf(m, value(i));
  const float max = Block<kThreads>::Max(m, sh);
  double s = 0.0;
  for (int32_t i = threadIdx.x; i < size; i += kThreads) {
    s += exp(static_cast<double>(value(i) - max));
  }
  const double sum = Block<kThreads>::Sum(s, sh);
  *max_out = max;
  *log_sum_out = static_cast<float>(log(sum));
}

// The n best of value(0..size), best first (CPU order), into out_v/out_id
// (shared or global, n entries). REQUIRES 1 <= n <= min(size, kGpuSelectMax).
// Each thread keeps its own sorted n best (the true n best are all among
// them), then n rounds of a block-wide best-of-heads pop them in order.
template <int kThreads, class ValueFn>
__device__ void BlockTopN(ValueFn value, int32_t size, int32_t n, float* out_v, int32_t* out_id,
                          typename Block<kThreads>::Shared& sh) {
  float lv[kGpuSelectMax];
  int32_t li[kGpuSelectMax];
  int32_t count = 0;
  for (int32_t i = threadIdx.x; i < size; i += kThreads) {
    const float v = value(i);
    if (count == n && !Better(v, i, lv[n - 1], li[n - 1])) continue;
    int32_t pos = count < n ? count++ : n - 1;
    while (pos > 0 && Better(v, i, lv[pos - 1], li[pos - 1])) {
      lv[pos] = lv[pos - 1];
      li[pos] = li[pos - 1];
      --pos;
    }
    lv[pos] = v;
    li[pos] = i;
  }
  int32_t head = 0;
  for (int32_t k = 0; k < n; ++k) {
    const Scored mine = head < count ? Scored{lv[head], li[head]} : Scored{NegInf(), INT32_MAX};
    const Scored best = Block<kThreads>::Best(mine, sh);
    if (threadIdx.x == 0) {
      out_v[k] = best.v;
      out_id[k] = best.id;
    }
    // Ids are distinct: only the owner of the winner advances.
    if (head < count && li[head] == best.id) ++head;
  }
  __syncthreads();
}

// Candidates sorted best first: values (processed logits) and token ids.
struct Sorted {
  const float* v;
  const int32_t* id;
};

// Shared state of the draw; part of FinishKernel's shared memory.
struct DrawShared {
  double thresholds[kDrawBatch];
  int32_t first[kDrawBatch];
};

// For each threshold t[s], s < count_t: the first index i < count whose
// inclusive prefix sum q(0) + ... + q(i) (in double) satisfies
//   strict: t < prefix   (the draw:  u < acc)
//   else:   prefix >= t  (top-p:     mass >= p)
// or `count` when none does; into ds.first[s]. Tiles of kThreads * kScanItems
// items, each thread a contiguous run; stops at the tile that resolves all.
template <int kThreads, class QFn>
__device__ void FirstCrossing(QFn q, int32_t count, int32_t count_t, bool strict, DrawShared& ds,
                              typename Block<kThreads>::Shared& sh) {
  using ScanD = typename Block<kThreads>::ScanD;
  constexpr int32_t kTile = kThreads * kScanItems;
  for (int32_t s = threadIdx.x; s < count_t; s += kThreads) ds.first[s] = INT32_MAX;
  __syncthreads();
  uint32_t resolved = 0;  // bit s: threshold s found in an earlier tile
  double carry = 0.0;
  for (int64_t base = 0; base < count; base += kTile) {
    double qv[kScanItems];
    double local = 0.0;
    const int64_t first_item = base + int64_t{threadIdx.x} * kScanItems;
#pragma unroll
    for (int j = 0; j < kScanItems; ++j) {
      const int64_t idx = first_item + j;
      qv[j] = idx < count ? static_cast<double>(q(static_cast<int32_t>(idx))) : 0.0;
      local += qv[j];
    }
    double exclusive = 0.0, aggregate = 0.0;
    ScanD(sh.temp.scan).ExclusiveSum(local, exclusive, aggregate);
    double acc = carry + exclusive;
    double incl[kScanItems];
#pragma unroll
    for (int j = 0; j < kScanItems; ++j) {
      acc += qv[j];
      incl[j] = acc;
    }
    for (int32_t s = 0; s < count_t; ++s) {
      if (resolved & (1u << s)) continue;
      const double t = ds.thresholds[s];
#pragma unroll
      for (int j = 0; j < kScanItems; ++j) {
        const int64_t idx = first_item + j;
        if (idx < count && (strict ? t < incl[j] : incl[j] >= t)) {
          atomicMin(&ds.first[s], static_cast<int32_t>(idx));
          break;
        }
      }
    }
    carry += aggregate;
    __syncthreads();  // atomics done; scan storage free
    bool all = true;
    for (int32_t s = 0; s < count_t; ++s) {
      if (ds.first[s] != INT32_MAX) {
        resolved |= 1u << s;
      } else {
        all = false;
      }
    }
    __syncthreads();  // everyone read ds.first before the next tile's atomics
    if (all) break;
  }
  for (int32_t s = threadIdx.x; s < count_t; s += kThreads) {
    if (ds.first[s] == INT32_MAX) ds.first[s] = count;
  }
  __syncthreads();
}

// cpu::PrepareDraw + cpu::DrawToken over candidates c[0, k0) for every sample
// of the row. Writes the tokens and their raw log-probs.
template <int kThreads>
__device__ void DrawRow(Sorted c, int32_t k0, const GpuSamplingRow& row, const uint64_t* keys,
                        const float* logits_row, const RowStats& st, const GpuSamplingOutputs& out,
                        DrawShared& ds, typename Block<kThreads>::Shared& sh) {
  using B = Block<kThreads>;
  const float v0 = c.v[0];
  const float temperature = row.temperature;
  auto prob = [&](int32_t i) { return expf((c.v[i] - v0) / temperature); };
  // Softmax over the kept candidates at temperature T.
  double part = 0.0;
  for (int32_t i = threadIdx.x; i < k0; i += kThreads) part += static_cast<double>(prob(i));
  const double sum = B::Sum(part, sh);
  auto q = [&](int32_t i) { return static_cast<float>(static_cast<double>(prob(i)) / sum); };
  int32_t keep = k0;
  // top-p: the smallest prefix whose mass reaches p (at least one token).
  if (row.top_p < 1.0f) {
    if (!(row.top_p > 0.0f)) {
      keep = 1;
    } else {
      if (threadIdx.x == 0) ds.thresholds[0] = static_cast<double>(row.top_p);
      __syncthreads();
      FirstCrossing<kThreads>(q, k0, 1, /*strict=*/false, ds, sh);
      const int32_t m = ds.first[0];
      keep = m < k0 ? m + 1 : k0;
      __syncthreads();
    }
  }
  // min-p: drop from the first token below min_p times the most likely one.
  if (row.min_p > 0.0f) {
    const float floor = row.min_p * q(0);
    int32_t first_below = keep;
    for (int32_t i = 1 + threadIdx.x; i < keep; i += kThreads) {
      if (!(q(i) >= floor)) {
        first_below = i;
        break;
      }
    }
    keep = B::Min(first_below, sh);
  }
  part = 0.0;
  for (int32_t i = threadIdx.x; i < keep; i += kThreads) part += static_cast<double>(q(i));
  const double total = B::Sum(part, sh);
  for (int32_t s0 = 0; s0 < row.num_samples; s0 += kDrawBatch) {
    const int32_t batch = min(kDrawBatch, row.num_samples - s0);
    if (threadIdx.x < batch) {
      const uint64_t key = keys[row.sample_offset + s0 + threadIdx.x];
      ds.thresholds[threadIdx.x] = static_cast<double>(key >> 11) * 0x1.0p-53 * total;
    }
    __syncthreads();
    FirstCrossing<kThreads>(q, keep, batch, /*strict=*/true, ds, sh);
    if (threadIdx.x < batch) {
      const int32_t idx = min(ds.first[threadIdx.x], keep - 1);
      const int32_t token = c.id[idx];
      const int32_t slot = row.sample_offset + s0 + threadIdx.x;
      out.tokens[slot] = token;
      out.logprobs[slot] = (logits_row[token] - st.raw_max) - st.raw_log_sum;
    }
    __syncthreads();
  }
}

// One CTA per row: raw log-softmax statistics; the processed row (into
// keys_in, for rows with biases or a penalty that draw or rank: biases, then
// penalties, as cpu::ProcessLogits); greedy rows' tokens; processed
// log-softmax statistics of beam rows.
__global__ void __launch_bounds__(kPrepareThreads)
    PrepareKernel(const float* __restrict__ logits, int32_t vocab,
                  const GpuSamplingRow* __restrict__ rows, const int32_t* __restrict__ history,
                  const int32_t* __restrict__ bias_ids, const float* __restrict__ bias_values,
                  Workspace ws, GpuSamplingOutputs out) {
  using B = Block<kPrepareThreads>;
  __shared__ typename B::Shared sh;
  const int32_t r = blockIdx.x;
  const GpuSamplingRow row = rows[r];
  const RowKind kind = Classify(row, vocab);
  const int64_t row_base = int64_t{r} * vocab;
  const float* L = logits + row_base;

  RowStats st{};
  LogSoftmaxStats<kPrepareThreads>([&](int32_t i) { return L[i]; }, vocab, sh, &st.raw_max,
                                   &st.raw_log_sum);
  const float* P = L;
  if (kind != kNone && ProcessesLogits(row)) {
    float* pen = ws.keys_in + row_base;
    int32_t* scratch = ws.vals_in + row_base;  // per-token flags and counts
    // allowed_only: everything banned but the listed tokens.
    for (int32_t i = threadIdx.x; i < vocab; i += kPrepareThreads) {
      pen[i] = row.allowed_only ? NegInf() : L[i];
    }
    __syncthreads();
    if (row.num_biases > 0) {
      // x += bias in float, as the CPU (ids are distinct: one thread each,
      // and each reads its raw logit).
      const int32_t* ids = bias_ids + row.bias_offset;
      const float* values = bias_values + row.bias_offset;
      for (int32_t j = threadIdx.x; j < row.num_biases; j += kPrepareThreads) {
        const int32_t t = ids[j];
        if (t >= 0 && t < vocab) pen[t] = __fadd_rn(L[t], values[j]);
      }
      __syncthreads();
    }
    // Then the penalties (each part only when set, as cpu::ApplyPenalties).
    const int32_t* prompt = history + row.history_offset;
    const int32_t* output = prompt + row.num_prompt_tokens;
    const int32_t seen = row.num_prompt_tokens + row.num_output_tokens;
    if (row.repetition_penalty != 1.0f) {
      // Every token seen, prompt or output, once: the first thread to flag
      // a token applies its penalty.
      for (int32_t j = threadIdx.x; j < seen; j += kPrepareThreads) {
        const int32_t t = prompt[j];
        if (t >= 0 && t < vocab) scratch[t] = 0;
      }
      __syncthreads();
      for (int32_t j = threadIdx.x; j < seen; j += kPrepareThreads) {
        const int32_t t = prompt[j];
        if (t >= 0 && t < vocab && atomicExch(&scratch[t], 1) == 0) {
          const float x = pen[t];
          pen[t] = x > 0 ? x / row.repetition_penalty : x * row.repetition_penalty;
        }
      }
      __syncthreads();
    }
    if (row.presence_penalty != 0.0f || row.frequency_penalty != 0.0f) {
      // Output counts; the thread that takes a token's count applies
      // x -= frequency * count + presence (rounded as on the CPU: no FMA).
      for (int32_t j = threadIdx.x; j < row.num_output_tokens; j += kPrepareThreads) {
        const int32_t t = output[j];
        if (t >= 0 && t < vocab) scratch[t] = 0;
      }
      __syncthreads();
      for (int32_t j = threadIdx.x; j < row.num_output_tokens; j += kPrepareThreads) {
        const int32_t t = output[j];
        if (t >= 0 && t < vocab) atomicAdd(&scratch[t], 1);
      }
      __syncthreads();
      for (int32_t j = threadIdx.x; j < row.num_output_tokens; j += kPrepareThreads) {
        const int32_t t = output[j];
        if (t < 0 || t >= vocab) continue;
        const int32_t n = atomicExch(&scratch[t], 0);
        if (n > 0) {
          const float penalty = __fadd_rn(__fmul_rn(row.frequency_penalty, static_cast<float>(n)),
                                          row.presence_penalty);
          pen[t] = __fsub_rn(pen[t], penalty);
        }
      }
      __syncthreads();
    }
    P = pen;
  }
  if (kind == kGreedy) {
    Scored best{NegInf(), INT32_MAX};
    for (int32_t i = threadIdx.x; i < vocab; i += kPrepareThreads) {
      const float v = P[i];
      if (Better(v, i, best.v, best.id)) best = Scored{v, i};
    }
    best = B::Best(best, sh);
    const float logprob = (L[best.id] - st.raw_max) - st.raw_log_sum;
    for (int32_t s = threadIdx.x; s < row.num_samples; s += kPrepareThreads) {
      out.tokens[row.sample_offset + s] = best.id;
      out.logprobs[row.sample_offset + s] = logprob;
    }
  }
  if (kind == kSelectBeam || kind == kSortBeam) {
    LogSoftmaxStats<kPrepareThreads>([&](int32_t i) { return P[i]; }, vocab, sh, &st.pen_max,
                                     &st.pen_log_sum);
  }
  if (threadIdx.x == 0) {
    ws.stats[r] = st;
    if (row.score_token >= 0) {
      out.token_logprobs[r] = (L[row.score_token] - st.raw_max) - st.raw_log_sum;
    }
  }
}

// grid (x, rows): the sort keys and ids of sort rows, and every row's segment.
__global__ void FillSortKernel(const float* __restrict__ logits, int32_t vocab,
                               const GpuSamplingRow* __restrict__ rows, Workspace ws) {
  const int32_t r = blockIdx.y;
  const GpuSamplingRow row = rows[r];
  const RowKind kind = Classify(row, vocab);
  const int64_t row_base = int64_t{r} * vocab;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    ws.seg_begin[r] = static_cast<int32_t>(row_base);
    ws.seg_end[r] = static_cast<int32_t>(IsSortKind(kind) ? row_base + vocab : row_base);
  }
  if (!IsSortKind(kind)) return;
  const float* P = ProcessesLogits(row) ? ws.keys_in + row_base : logits + row_base;
  const RowStats st = ws.stats[r];
  float* keys = ws.keys_in + row_base;  // may be P itself: same element, same thread
  int32_t* ids = ws.vals_in + row_base;
  for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < vocab; i += gridDim.x * blockDim.x) {
    float k = P[i];
    if (kind == kSortBeam) k = (k - st.pen_max) - st.pen_log_sum;
    if (k == 0.0f) k = 0.0f;  // -0 and +0 are one key
    keys[i] = k;
    ids[i] = i;
  }
}

// One CTA per row: top log-probs, beam candidates, and the draws.
__global__ void __launch_bounds__(kFinishThreads)
    FinishKernel(const float* __restrict__ logits, int32_t vocab,
                 const GpuSamplingRow* __restrict__ rows, const uint64_t* __restrict__ keys,
                 Workspace ws, GpuSamplingOutputs out) {
  using B = Block<kFinishThreads>;
  __shared__ typename B::Shared sh;
  __shared__ DrawShared ds;
  __shared__ float sel_v[kGpuSelectMax];
  __shared__ int32_t sel_id[kGpuSelectMax];
  const int32_t r = blockIdx.x;
  const GpuSamplingRow row = rows[r];
  const RowKind kind = Classify(row, vocab);
  const int64_t row_base = int64_t{r} * vocab;
  const float* L = logits + row_base;
  const float* P = ProcessesLogits(row) ? ws.keys_in + row_base : L;
  const RowStats st = ws.stats[r];

  if (out.max_top > 0) {
    const bool sample_mode = row.mode == static_cast<int32_t>(cpu::SamplingMode::kSample);
    const int32_t n = sample_mode ? min(row.num_top_logprobs, vocab) : 0;
    if (n > 0) {
      BlockTopN<kFinishThreads>(
          [&](int32_t i) { return (L[i] - st.raw_max) - st.raw_log_sum; }, vocab, n, sel_v,
          sel_id, sh);
    }
    for (int32_t j = threadIdx.x; j < out.max_top; j += kFinishThreads) {
      out.top_ids[int64_t{r} * out.max_top + j] = j < n ? sel_id[j] : -1;
      out.top_logprobs[int64_t{r} * out.max_top + j] = j < n ? sel_v[j] : NegInf();
    }
    __syncthreads();
  }

  switch (kind) {
    case kSelectBeam:
    case kSortBeam: {
      const int32_t n = min(row.num_samples, vocab);
      const float* v = sel_v;
      const int32_t* id = sel_id;
      if (kind == kSelectBeam) {
        BlockTopN<kFinishThreads>(
            [&](int32_t i) { return (P[i] - st.pen_max) - st.pen_log_sum; }, vocab, n, sel_v,
            sel_id, sh);
      } else {
        v = ws.keys_out + row_base;
        id = ws.vals_out + row_base;
      }
      for (int32_t s = threadIdx.x; s < row.num_samples; s += kFinishThreads) {
        const int32_t slot = row.sample_offset + s;
        out.tokens[slot] = s < n ? id[s] : -1;
        // Sorted keys are the log-probs themselves (+0 for -0).
        out.logprobs[slot] = s < n ? v[s] : NegInf();
      }
      break;
    }
    case kSelectDraw:
      BlockTopN<kFinishThreads>([&](int32_t i) { return P[i]; }, vocab, row.top_k, sel_v,
                                sel_id, sh);
      DrawRow<kFinishThreads>(Sorted{sel_v, sel_id}, row.top_k, row, keys, L, st, out, ds, sh);
      break;
    case kSortDraw: {
      const int32_t k0 = row.top_k > 0 && row.top_k < vocab ? row.top_k : vocab;
      DrawRow<kFinishThreads>(Sorted{ws.keys_out + row_base, ws.vals_out + row_base}, k0, row,
                              keys, L, st, out, ds, sh);
      break;
    }
    default:
      break;
  }
}

// ------------------------------------------------------------------ host --

bool ValidRow(const GpuSamplingRow& r, const GpuSamplingInputs& in, int32_t max_top) {
  if (r.mode != static_cast<int32_t>(cpu::SamplingMode::kSample) &&
      r.mode != static_cast<int32_t>(cpu::SamplingMode::kBeam)) {
    return false;
  }
  if (!(r.temperature >= 0.0f) || std::isinf(r.temperature)) return false;
  if (r.num_samples < 0 || r.sample_offset < 0 ||
      int64_t{r.sample_offset} + r.num_samples > in.num_samples) {
    return false;
  }
  if (r.num_top_logprobs < 0 || r.num_top_logprobs > max_top) return false;
  if (r.score_token < -1 || r.score_token >= in.vocab) return false;
  if (r.num_biases < 0) return false;
  if (r.num_biases > 0 &&
      (r.bias_offset < 0 || int64_t{r.bias_offset} + r.num_biases > in.num_biases)) {
    return false;
  }
  if (HasPenalties(r)) {
    if (r.history_offset < 0 || r.num_prompt_tokens < 0 || r.num_output_tokens < 0 ||
        r.history_offset + r.num_prompt_tokens + r.num_output_tokens > in.history_size ||
        int64_t{r.num_prompt_tokens} + r.num_output_tokens > INT32_MAX) {
      return false;
    }
  }
  return true;
}

}  // namespace

size_t SamplingWorkspaceBytes(int32_t rows, int32_t vocab) {
  if (!RowsAndVocabOk(rows, vocab)) return 0;
  size_t cub_bytes = 0;
  if (CubSortBytes(rows, vocab, &cub_bytes) != cudaSuccess) return 0;
  Workspace ws;
  // Laid out from an aligned base, plus slack for any base alignment.
  return Layout(rows, vocab, cub_bytes, reinterpret_cast<char*>(kAlign), &ws) + kAlign;
}

cudaError_t SampleRows(const GpuSamplingInputs& in, void* workspace, size_t workspace_bytes,
                       const GpuSamplingOutputs& out, cudaStream_t stream) {
  const int32_t rows = static_cast<int32_t>(std::min<size_t>(in.rows.size(), INT32_MAX));
  if (in.rows.empty()) return cudaSuccess;
  if (!RowsAndVocabOk(rows, in.vocab) || in.logits == nullptr || in.rows_dev == nullptr ||
      in.num_samples < 0 || in.history_size < 0 || in.num_biases < 0 || out.max_top < 0 ||
      out.max_top > kGpuMaxTopLogprobs || workspace == nullptr) {
    return cudaErrorInvalidValue;
  }
  if ((in.num_samples > 0 && (out.tokens == nullptr || out.logprobs == nullptr)) ||
      (in.history_size > 0 && in.history_dev == nullptr) ||
      (in.num_biases > 0 && (in.bias_ids_dev == nullptr || in.bias_values_dev == nullptr)) ||
      (out.max_top > 0 && (out.top_ids == nullptr || out.top_logprobs == nullptr))) {
    return cudaErrorInvalidValue;
  }
  bool any_sort = false, any_finish = out.max_top > 0;
  for (const GpuSamplingRow& r : in.rows) {
    if (!ValidRow(r, in, out.max_top)) return cudaErrorInvalidValue;
    const RowKind kind = Classify(r, in.vocab);
    if ((kind == kSelectDraw || kind == kSortDraw) && in.keys_dev == nullptr) {
      return cudaErrorInvalidValue;
    }
    if (r.score_token >= 0 && out.token_logprobs == nullptr) return cudaErrorInvalidValue;
    any_sort |= IsSortKind(kind);
    any_finish |= kind != kNone && kind != kGreedy;
  }
  size_t cub_bytes = 0;
  cudaError_t err = CubSortBytes(rows, in.vocab, &cub_bytes);
  if (err != cudaSuccess) return err;
  if (workspace_bytes < SamplingWorkspaceBytes(rows, in.vocab)) return cudaErrorInvalidValue;
  Workspace ws;
  Layout(rows, in.vocab, cub_bytes, static_cast<char*>(workspace), &ws);

  PrepareKernel<<<rows, kPrepareThreads, 0, stream>>>(in.logits, in.vocab, in.rows_dev,
                                                      in.history_dev, in.bias_ids_dev,
                                                      in.bias_values_dev, ws, out);
  if ((err = cudaGetLastError()) != cudaSuccess) return err;
  if (any_sort) {
    constexpr int kFillThreads = 256;
    const unsigned chunks = static_cast<unsigned>(
        std::min<int64_t>((int64_t{in.vocab} + kFillThreads * 4 - 1) / (kFillThreads * 4), 1024));
    FillSortKernel<<<dim3(chunks, rows), kFillThreads, 0, stream>>>(in.logits, in.vocab,
                                                                    in.rows_dev, ws);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    size_t bytes = ws.cub_bytes;
    err = cub::DeviceSegmentedRadixSort::SortPairsDescending(
        ws.cub_temp, bytes, ws.keys_in, ws.keys_out, ws.vals_in, ws.vals_out, rows * in.vocab,
        rows, static_cast<const int32_t*>(ws.seg_begin), static_cast<const int32_t*>(ws.seg_end), 0, 32,
        stream);
    if (err != cudaSuccess) return err;
  }
  if (any_finish) {
    FinishKernel<<<rows, kFinishThreads, 0, stream>>>(in.logits, in.vocab, in.rows_dev,
                                                      in.keys_dev, ws, out);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t CopySamplingOutputsToHost(const GpuSamplingOutputs& out, int32_t rows,
                                      int32_t num_samples, int32_t* tokens, float* logprobs,
                                      int32_t* top_ids, float* top_logprobs, cudaStream_t stream,
                                      float* token_logprobs) {
  if (rows < 0 || num_samples < 0 || out.max_top < 0) return cudaErrorInvalidValue;
  cudaError_t err = cudaSuccess;
  if (num_samples > 0) {
    if (tokens == nullptr || logprobs == nullptr || out.tokens == nullptr ||
        out.logprobs == nullptr) {
      return cudaErrorInvalidValue;
    }
    err = cudaMemcpyAsync(tokens, out.tokens, sizeof(int32_t) * num_samples,
                          cudaMemcpyDeviceToHost, stream);
    if (err != cudaSuccess) return err;
    err = cudaMemcpyAsync(logprobs, out.logprobs, sizeof(float) * num_samples,
                          cudaMemcpyDeviceToHost, stream);
    if (err != cudaSuccess) return err;
  }
  const size_t top = static_cast<size_t>(rows) * out.max_top;
  if (top > 0 && top_ids != nullptr && top_logprobs != nullptr && out.top_ids != nullptr &&
      out.top_logprobs != nullptr) {
    err = cudaMemcpyAsync(top_ids, out.top_ids, sizeof(int32_t) * top, cudaMemcpyDeviceToHost,
                          stream);
    if (err != cudaSuccess) return err;
    err = cudaMemcpyAsync(top_logprobs, out.top_logprobs, sizeof(float) * top,
                          cudaMemcpyDeviceToHost, stream);
    if (err != cudaSuccess) return err;
  }
  if (rows > 0 && token_logprobs != nullptr && out.token_logprobs != nullptr) {
    err = cudaMemcpyAsync(token_logprobs, out.token_logprobs, sizeof(float) * rows,
                          cudaMemcpyDeviceToHost, stream);
  }
  return err;
}

void GpuSamplingBatch::Clear() {
  rows.clear();
  history.clear();
  keys.clear();
  bias_ids.clear();
  bias_values.clear();
  max_top = 0;
}

void GpuSamplingBatch::Add(const cpu::SamplingRowParams& p) {
  GpuSamplingRow row;
  row.temperature = p.temperature;
  row.top_k = p.top_k;
  row.top_p = p.top_p;
  row.min_p = p.min_p;
  row.repetition_penalty = p.repetition_penalty;
  row.presence_penalty = p.presence_penalty;
  row.frequency_penalty = p.frequency_penalty;
  row.mode = static_cast<int32_t>(p.mode);
  row.num_samples = std::max(0, p.num_samples);
  row.sample_offset = static_cast<int32_t>(keys.size());
  row.num_top_logprobs = p.mode == cpu::SamplingMode::kSample ? std::max(0, p.num_top_logprobs) : 0;
  if (p.HasPenalties()) {
    row.history_offset = static_cast<int64_t>(history.size());
    row.num_prompt_tokens = static_cast<int32_t>(p.prompt_tokens.size());
    row.num_output_tokens = static_cast<int32_t>(p.output_tokens.size());
    history.insert(history.end(), p.prompt_tokens.begin(), p.prompt_tokens.end());
    history.insert(history.end(), p.output_tokens.begin(), p.output_tokens.end());
  }
  row.bias_offset = static_cast<int32_t>(bias_ids.size());
  row.num_biases = static_cast<int32_t>(p.biases.size());
  row.allowed_only = p.allowed_only ? 1 : 0;
  for (const cpu::LogitBias& b : p.biases) {
    bias_ids.push_back(b.token);
    bias_values.push_back(b.bias);
  }
  const bool draws = p.mode == cpu::SamplingMode::kSample && p.temperature != 0.0f;
  for (int32_t s = 0; s < row.num_samples; ++s) {
    keys.push_back(draws && static_cast<size_t>(s) < p.keys.size() ? p.keys[s] : 0);
  }
  max_top = std::max(max_top, row.num_top_logprobs);
  rows.push_back(row);
}

void GpuSamplingBatch::AddScoring(int32_t target, int32_t num_top) {
  GpuSamplingRow row;
  row.temperature = 0.0f;
  row.num_samples = 0;
  row.sample_offset = static_cast<int32_t>(keys.size());
  row.num_top_logprobs = std::max(0, num_top);
  row.score_token = target;
  max_top = std::max(max_top, row.num_top_logprobs);
  rows.push_back(row);
}

}  // namespace folio::kernels::gpu
