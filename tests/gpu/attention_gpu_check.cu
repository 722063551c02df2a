// GPU check: the CUDA paged attention (kernels/cuda/attention.cuh) against
// its CPU twins cpu::PagedAttentionDecode / cpu::PagedAttentionPrefill on
// random shapes (ggml test-backend-ops style). The CPU twin runs on an fp32
// copy of the very cache contents the GPU sees (16-bit values widened on the
// host), so the only differences are accumulation order and, for 16-bit
// prefill on tensor cores, q and the softmax probabilities rounded to the
// cache type. Block ids are shuffled; slots past each context and spare
// blocks hold NaN and table entries past a sequence's last block are -1, so
// a kernel reading what it must not produces NaN (or faults) and fails.
// Sliding-window cases also fill with NaN every block that lies wholly
// before all of a sequence's queries' windows (the kernels must not read
// them: the scheduler may one day free them) and, on every other sequence,
// set those blocks' entries of the GPU's table to -1 (the kernels must not
// even look them up).
// Prints one PASS/FAIL line per case, then a summary.
// Exit: 0 all passed, 1 any failure, 77 no CUDA device (ctest: skipped).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cache_layout.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_views.h"
#include "kernels/cuda/attention.cuh"
#include "tests/gpu/gpu_check_util.h"

namespace folio::kernels {
namespace {

using gpu_check::DeviceArray;
using gpu_check::FastUniform;
using gpu_check::FromFloat;
using gpu_check::Report;
using gpu_check::ToFloat;

int g_sms = 0;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

const char* DtypeName(CacheDtype d) {
  return d == CacheDtype::kFloat32 ? "fp32" : d == CacheDtype::kFloat16 ? "fp16" : "bf16";
}

struct Case {
  CacheDtype dtype = CacheDtype::kBFloat16;
  int32_t head_dim = 128;
  int32_t block_size = 16;
  int32_t num_kv_heads = 1;
  int32_t group = 1;
  std::vector<int32_t> context_lens;
  std::vector<int32_t> query_lens;  // empty: decode
  int32_t partition_tokens = 0;     // decode only
  gpu::GpuDecodeKernel kernel = gpu::GpuDecodeKernel::kAuto;  // decode only
  float score_mult = 1.0f;          // scale = score_mult / sqrt(head_dim)
  int32_t sliding_window = 0;       // > 0: each query sees its last this many positions
  uint32_t seed = 1;

  bool prefill() const { return !query_lens.empty(); }
  int32_t num_heads() const { return num_kv_heads * group; }
  int32_t num_seqs() const { return static_cast<int32_t>(context_lens.size()); }

  std::string Name() const {
    std::string s = std::string(prefill() ? "prefill " : "decode ") + DtypeName(dtype) +
                    " hd=" + std::to_string(head_dim) + " bs=" + std::to_string(block_size) +
                    " heads=" + std::to_string(num_heads()) + "/" + std::to_string(num_kv_heads) +
                    " x" + std::to_string(static_cast<int>(score_mult));
    if (!prefill()) s += " part=" + std::to_string(partition_tokens);
    if (kernel == gpu::GpuDecodeKernel::kSimt) s += " simt";
    if (kernel == gpu::GpuDecodeKernel::kTensorCores) s += " mma";
    if (kernel == gpu::GpuDecodeKernel::kTensorCoresPersistent) s += " mma-persist";
    if (sliding_window > 0) s += " win=" + std::to_string(sliding_window);
    s += " ctx";
    if (prefill()) s += ":q";
    const int32_t shown = std::min(num_seqs(), 6);
    for (int32_t i = 0; i < shown; ++i) {
      s += i ? ',' : '=';
      s += std::to_string(context_lens[i]);
      if (prefill()) {
        s += ':';
        s += std::to_string(query_lens[i]);
      }
    }
    if (shown < num_seqs()) s += ",...(" + std::to_string(num_seqs()) + " seqs)";
    return s;
  }
};

// Max |got - want| over max |want| (at least 1e-3), NaN/Inf -> infinity;
// rows of `skip` (not written by contract) must still be NaN.
struct Errors {
  double rel = 0, nmse = 0;
  int64_t touched = 0;  // rows that must be untouched but were written
};

Errors Compare(const std::vector<float>& got, const std::vector<float>& want,
               const std::vector<bool>& row_written, int64_t row_elems) {
  Errors e;
  double max_diff = 0, max_mag = 1e-3, sq_diff = 0, sq_ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!row_written[i / row_elems]) {
      if (!std::isnan(got[i])) ++e.touched;
      continue;
    }
    if (!std::isfinite(got[i])) {
      e.rel = e.nmse = std::numeric_limits<double>::infinity();
      return e;
    }
    const double d = double{got[i]} - double{want[i]};
    max_diff = std::max(max_diff, std::fabs(d));
    max_mag = std::max(max_mag, std::fabs(double{want[i]}));
    sq_diff += d * d;
    sq_ref += double{want[i]} * want[i];
  }
  e.rel = max_diff / max_mag;
  e.nmse = sq_ref > 0 ? sq_diff / sq_ref : sq_diff;
  return e;
}

template <typename T>
void RunCase(const Case& c) {
  const std::string name = c.Name();
  std::mt19937 rng(c.seed);
  FastUniform uni{c.seed * 0x9e3779b97f4a7c15ull + 1};
  const int32_t n = c.num_seqs();
  const int32_t bs = c.block_size;
  const int32_t hd = c.head_dim;

  // Block tables: shuffled ids, 3 spare (NaN) blocks, -1 past the last block.
  int32_t used = 0, max_blocks = 1;
  for (int32_t len : c.context_lens) {
    used += (len + bs - 1) / bs;
    max_blocks = std::max(max_blocks, (len + bs - 1) / bs + 1);
  }
  const int32_t num_blocks = used + 3;
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<int32_t> table(int64_t{n} * max_blocks, -1);
  int32_t next = 0;
  for (int32_t s = 0; s < n; ++s) {
    for (int32_t b = 0; b < (c.context_lens[s] + bs - 1) / bs; ++b) {
      table[int64_t{s} * max_blocks + b] = ids[next++];
    }
  }
  // Pool in storage type T and its fp32 twin; NaN wherever no context lives.
  const CacheShape shape{c.num_kv_heads, bs, hd};
  const int64_t pool = num_blocks * BlockElems(shape);
  std::vector<T> k_pool(pool, FromFloat<T>(kNaN)), v_pool(pool, FromFloat<T>(kNaN));
  std::vector<float> k_twin(pool, kNaN), v_twin(pool, kNaN);
  for (int32_t s = 0; s < n; ++s) {
    for (int32_t pos = 0; pos < c.context_lens[s]; ++pos) {
      const int64_t block = table[int64_t{s} * max_blocks + pos / bs];
      for (int32_t h = 0; h < c.num_kv_heads; ++h) {
        for (int32_t d = 0; d < hd; ++d) {
          const int64_t i = CacheIndex(shape, block, h, pos % bs, d);
          k_pool[i] = FromFloat<T>(uni());
          v_pool[i] = FromFloat<T>(uni());
          k_twin[i] = ToFloat(k_pool[i]);
          v_twin[i] = ToFloat(v_pool[i]);
        }
      }
    }
  }
  // Blocks wholly before the window of the sequence's first query: NaN; on
  // odd sequences, also -1 in the device's copy of the table.
  std::vector<int32_t> device_table = table;
  if (c.sliding_window > 0) {
    for (int32_t s = 0; s < n; ++s) {
      const int32_t first_query = c.context_lens[s] - (c.prefill() ? c.query_lens[s] : 1);
      const int32_t visible = std::max(0, first_query - c.sliding_window + 1);
      for (int32_t b = 0; (b + 1) * bs <= visible; ++b) {
        const int64_t begin = CacheIndex(shape, table[int64_t{s} * max_blocks + b], 0, 0, 0);
        for (int64_t i = begin; i < begin + BlockElems(shape); ++i) {
          k_pool[i] = v_pool[i] = FromFloat<T>(kNaN);
          k_twin[i] = v_twin[i] = kNaN;
        }
        if (s % 2 == 1) device_table[int64_t{s} * max_blocks + b] = -1;
      }
    }
  }
  // Queries. Prefill rows start at an offset and leave 2 rows after the
  // last sequence: rows outside every sequence must stay untouched.
  const int64_t row_elems = int64_t{c.num_heads()} * hd;
  std::vector<int32_t> query_start;
  int64_t rows = n;
  if (c.prefill()) {
    query_start.push_back(3);
    for (int32_t len : c.query_lens) query_start.push_back(query_start.back() + len);
    rows = query_start.back() + 2;
  }
  std::vector<float> q(rows * row_elems);
  for (float& x : q) x = uni();
  std::vector<bool> row_written(rows, !c.prefill());
  if (c.prefill()) {
    for (int64_t r = query_start.front(); r < query_start.back(); ++r) row_written[r] = true;
  }
  const float scale = c.score_mult / std::sqrt(static_cast<float>(hd));

  // CPU twin.
  const PagedKvLayer twin{k_twin.data(), v_twin.data(), num_blocks, c.num_kv_heads, bs, hd};
  const BlockTables host_tables{table.data(), n, max_blocks};
  std::string error;
  if (!ValidatePagedKvLayer(twin, &error) ||
      !ValidateBlockTables(host_tables, c.context_lens.data(), bs, num_blocks, &error) ||
      (c.prefill() &&
       !ValidateQueryStarts(query_start.data(), c.context_lens.data(), n, &error))) {
    return Report(name, false, "bad case: " + error);
  }
  std::vector<float> want(q.size(), kNaN);
  if (c.prefill()) {
    cpu::PagedAttentionPrefill(q.data(), twin, host_tables, query_start.data(),
                               c.context_lens.data(), c.num_heads(), scale, want.data(),
                               c.sliding_window);
  } else {
    cpu::PagedAttentionDecode(q.data(), twin, host_tables, c.context_lens.data(), c.num_heads(),
                              scale, want.data(), c.sliding_window);
  }

  // GPU.
  DeviceArray<T> dk, dv;
  DeviceArray<int32_t> dtable, dctx, dqs;
  DeviceArray<float> dq, dout;
  DeviceArray<uint8_t> dws;
  CHECK_CUDA(dk.AllocAndUpload(k_pool));
  CHECK_CUDA(dv.AllocAndUpload(v_pool));
  CHECK_CUDA(dtable.AllocAndUpload(device_table));
  CHECK_CUDA(dctx.AllocAndUpload(c.context_lens));
  CHECK_CUDA(dq.AllocAndUpload(q));
  CHECK_CUDA(dout.AllocAndUpload(std::vector<float>(q.size(), kNaN)));
  const gpu::GpuPagedKvLayer kv{dk.data(), dv.data(), c.dtype, num_blocks, c.num_kv_heads, bs, hd};
  const BlockTables dev_tables{dtable.data(), n, max_blocks};
  std::string detail;
  if (c.prefill()) {
    CHECK_CUDA(dqs.AllocAndUpload(query_start));
    const int32_t max_q = *std::max_element(c.query_lens.begin(), c.query_lens.end());
    CHECK_CUDA(gpu::PagedAttentionPrefill(dq.data(), kv, dev_tables, dqs.data(), dctx.data(), n,
                                          max_q, c.num_heads(), scale, dout.data(), nullptr,
                                          c.sliding_window));
  } else {
    const int32_t max_ctx = *std::max_element(c.context_lens.begin(), c.context_lens.end());
    const size_t ws_bytes = gpu::PagedAttentionDecodeWorkspaceBytes(
        n, c.num_heads(), hd, max_ctx, c.partition_tokens);
    void* ws = nullptr;
    if (ws_bytes > 0) {
      CHECK_CUDA(dws.Alloc(ws_bytes));
      ws = dws.data();
    }
    CHECK_CUDA(gpu::PagedAttentionDecode(dq.data(), kv, dev_tables, dctx.data(), max_ctx,
                                         c.num_heads(), scale, ws, ws_bytes, dout.data(), nullptr,
                                         c.partition_tokens, c.kernel, c.sliding_window));
    const int32_t read_len = gpu::DecodeReadLength(max_ctx, c.sliding_window, bs);
    const int32_t slice = gpu::ChooseDecodePartition(n, c.num_heads(), c.num_kv_heads, read_len,
                                                     c.partition_tokens, g_sms, c.dtype, c.kernel);
    detail += "slice=" + std::to_string(slice) + " ";
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> got;
  CHECK_CUDA(dout.Download(&got));

  // The SIMT kernels (MHA decode, fp32 caches) compute in fp32 from the same
  // values: only the summation order differs. The tensor-core kernels
  // (prefill, and GQA decode, of 16-bit caches) round q and P to the cache
  // type (a host simulation gives max rel ~5e-4 fp16, ~5e-3 bf16).
  const bool tensor_cores =
      c.dtype != CacheDtype::kFloat32 &&
      (c.prefill() || c.kernel == gpu::GpuDecodeKernel::kTensorCores ||
       c.kernel == gpu::GpuDecodeKernel::kTensorCoresPersistent ||
       (c.kernel == gpu::GpuDecodeKernel::kAuto && c.group >= 2));
  double tol = 5e-4;
  if (tensor_cores && c.dtype == CacheDtype::kFloat16) tol = 5e-3;
  if (tensor_cores && c.dtype == CacheDtype::kBFloat16) tol = 2e-2;
  const Errors e = Compare(got, want, row_written, row_elems);
  char buf[160];
  std::snprintf(buf, sizeof(buf), "rel_err=%.3g nmse=%.3g tol=%.3g untouched_written=%lld",
                e.rel, e.nmse, tol, static_cast<long long>(e.touched));
  Report(name, e.rel <= tol && e.touched == 0, detail + buf);
}

void Run(const Case& c) {
  switch (c.dtype) {
    case CacheDtype::kFloat32: return RunCase<float>(c);
    case CacheDtype::kFloat16: return RunCase<__half>(c);
    case CacheDtype::kBFloat16: return RunCase<__nv_bfloat16>(c);
    default: break;  // no quantized CUDA cache yet: no such case
  }
}

// Context lengths that matter: empty, 1, around block boundaries, and long
// enough (>= 512) that few-CTA batches get partitioned automatically.
int32_t PickContext(int32_t bs, std::mt19937& rng) {
  const int32_t special[] = {0, 1, bs - 1, bs, bs + 1, 2 * bs, 3 * bs + 1, 511, 512, 1024};
  std::uniform_int_distribution<int32_t> coin(0, 3);
  switch (coin(rng)) {
    case 0: return special[std::uniform_int_distribution<int32_t>(0, 9)(rng)];
    case 1: return std::uniform_int_distribution<int32_t>(600, 2600)(rng);
    default: return std::uniform_int_distribution<int32_t>(1, 300)(rng);
  }
}

// (num_kv_heads, group) pairs: MHA, GQA 32/8, MQA 8/1, odd groups, and a
// group of 16 (two row chunks per KV head in the SIMT decode, one in the
// tensor-core decode).
struct Heads {
  int32_t kv, group;
};
constexpr Heads kHeads[] = {{4, 1}, {8, 4}, {1, 8}, {2, 3}, {2, 2}, {1, 16}, {2, 5}, {1, 1}};

// A case of this shape, with no contexts yet.
Case ShapedCase(CacheDtype dtype, int32_t head_dim, int32_t block_size, Heads heads,
                float score_mult) {
  Case c;
  c.dtype = dtype;
  c.head_dim = head_dim;
  c.block_size = block_size;
  c.num_kv_heads = heads.kv;
  c.group = heads.group;
  c.score_mult = score_mult;
  return c;
}

void CheckInvalidArgs() {
  const std::string name = "invalid_args";
  float* dummy = nullptr;
  if (cudaMalloc(&dummy, 1 << 20) != cudaSuccess) return Report(name, false, "cudaMalloc");
  const int32_t* ids = reinterpret_cast<const int32_t*>(dummy);
  gpu::GpuPagedKvLayer kv{dummy, dummy, CacheDtype::kBFloat16, 4, 2, 16, 128};
  const BlockTables tables{ids, 2, 4};
  std::string why;
  bool ok = gpu::ValidateGpuPagedKvLayer(kv, &why);
  auto decode = [&](const gpu::GpuPagedKvLayer& layer, int32_t heads, void* ws, size_t ws_bytes,
                    int32_t max_ctx, int32_t part) {
    return gpu::PagedAttentionDecode(dummy, layer, tables, ids, max_ctx, heads, 0.1f, ws,
                                     ws_bytes, dummy, nullptr, part);
  };
  gpu::GpuPagedKvLayer fp32 = kv;
  fp32.dtype = CacheDtype::kFloat32;
  ok = ok && gpu::PagedAttentionDecode(dummy, fp32, tables, ids, 64, 4, 0.1f, nullptr, 0, dummy,
                                       nullptr, -1, gpu::GpuDecodeKernel::kTensorCores) ==
                 cudaErrorInvalidValue;  // tensor cores need a 16-bit cache
  ok = ok && gpu::PagedAttentionDecode(dummy, kv, tables, ids, 64, 4, 0.1f, nullptr, 0, dummy,
                                       nullptr, -1, static_cast<gpu::GpuDecodeKernel>(7)) ==
                 cudaErrorInvalidValue;
  gpu::GpuPagedKvLayer bad = kv;
  bad.head_dim = 96;
  ok = ok && !gpu::ValidateGpuPagedKvLayer(bad);
  ok = ok && decode(bad, 4, nullptr, 0, 64, -1) == cudaErrorInvalidValue;
  bad = kv;
  bad.block_size = 64;
  ok = ok && decode(bad, 4, nullptr, 0, 64, -1) == cudaErrorInvalidValue;
  ok = ok && decode(kv, 3, nullptr, 0, 64, -1) == cudaErrorInvalidValue;    // 3 % 2 != 0
  ok = ok && decode(kv, 4, nullptr, 0, 65, -1) == cudaErrorInvalidValue;    // > 4 blocks * 16
  ok = ok && decode(kv, 4, nullptr, 0, 64, 24) == cudaErrorInvalidValue;    // not x block_size
  ok = ok && decode(kv, 4, nullptr, 0, 64, 16) == cudaErrorInvalidValue;    // workspace needed
  const size_t need = gpu::PagedAttentionDecodeWorkspaceBytes(2, 4, 128, 64, 16);
  ok = ok && need > 0 && decode(kv, 4, dummy, need - 4, 64, 16) == cudaErrorInvalidValue;
  ok = ok && gpu::PagedAttentionDecodeWorkspaceBytes(2, 4, 128, 64, -1) == 0;
  ok = ok && gpu::PagedAttentionDecodeWorkspaceBytes(2, 4, 128, 511, 0) == 0;
  ok = ok && gpu::PagedAttentionPrefill(dummy, kv, tables, nullptr, ids, 2, 4, 4, 0.1f, dummy,
                                        nullptr) == cudaErrorInvalidValue;
  ok = ok && gpu::PagedAttentionPrefill(dummy, kv, tables, ids, ids, 3, 4, 4, 0.1f, dummy,
                                        nullptr) == cudaErrorInvalidValue;  // > tables.num_seqs
  ok = ok && gpu::PagedAttentionDecode(dummy, kv, tables, ids, 64, 4, 0.1f, nullptr, 0, dummy,
                                       nullptr, -1, gpu::GpuDecodeKernel::kAuto, -1) ==
                 cudaErrorInvalidValue;  // negative sliding_window
  ok = ok && gpu::PagedAttentionPrefill(dummy, kv, tables, ids, ids, 2, 4, 4, 0.1f, dummy,
                                        nullptr, -1) == cudaErrorInvalidValue;
  // Nothing enqueued must mean nothing went wrong on the device either.
  ok = ok && cudaDeviceSynchronize() == cudaSuccess;
  cudaFree(dummy);
  Report(name, ok, "");
}

// Sliding windows (Mistral, Qwen2): windows of 1 position, just under and
// over a block, odd sizes and 1000, over contexts shorter and longer than
// them, on both decode kernels (whole, auto-split, forced slices) and both
// prefill paths (chunks straddling the window's edge, whole prompts).
void CheckSlidingWindows(std::mt19937& rng, uint32_t& seed) {
  int32_t variant = 0;  // cycles the head layouts and the score scale
  for (CacheDtype dtype : {CacheDtype::kFloat32, CacheDtype::kBFloat16, CacheDtype::kFloat16}) {
    for (int32_t hd : {64, 128, 256}) {
      const int32_t bs = hd == 64 ? 8 : hd == 128 ? 16 : 32;
      for (int32_t window : {1, bs - 1, bs + 3, 37, 1000}) {
        Case c = ShapedCase(dtype, hd, bs, kHeads[variant % std::size(kHeads)],
                            (variant / std::size(kHeads)) % 2 ? 6.0f : 1.0f);
        ++variant;
        c.sliding_window = window;
        // Lengths: shorter than, equal to and one past the window; a window
        // starting at the last position of a block (the decode then masks
        // bs - 1 read positions: whole warps of the tensor-core decode at
        // bs 32); random; long enough to split.
        c.context_lens = {1, window, window + 1, window + 3 * bs - 1,
                          std::uniform_int_distribution<int32_t>(window + 2,
                                                                 window + 3 * bs + 9)(rng),
                          std::uniform_int_distribution<int32_t>(1000, 2600)(rng)};
        c.seed = seed++;
        Run(c);
        c.partition_tokens = 2 * bs;
        Run(c);
        c.partition_tokens = -1;
        Run(c);
        if (dtype != CacheDtype::kFloat32) {
          c.partition_tokens = 0;
          c.kernel =
              c.group >= 2 ? gpu::GpuDecodeKernel::kSimt : gpu::GpuDecodeKernel::kTensorCores;
          Run(c);
        }
        Case pc = c;
        pc.kernel = gpu::GpuDecodeKernel::kAuto;
        pc.partition_tokens = 0;
        pc.context_lens = {700, 90, 5, window + 40, 1200};
        pc.query_lens = {150, 90, 1, 41, 1};
        pc.seed = seed++;
        Run(pc);
      }
    }
  }
}

int Main() {
  if (gpu_check::DeviceCountOrSkip() == 0) return gpu_check::kExitSkip;
  g_sms = gpu_check::PrintDevice(0, /*with_sms=*/true).multiProcessorCount;
  const auto t0 = std::chrono::steady_clock::now();
  CheckInvalidArgs();

  std::mt19937 rng(20240611);
  uint32_t seed = 1;
  const CacheDtype dtypes[] = {CacheDtype::kFloat32, CacheDtype::kFloat16, CacheDtype::kBFloat16};
  std::uniform_int_distribution<int32_t> pick_heads(0, std::size(kHeads) - 1);
  for (CacheDtype dtype : dtypes) {
    for (int32_t hd : {64, 128, 256}) {
      for (int32_t bs : {8, 16, 32}) {
        Case c = ShapedCase(dtype, hd, bs, kHeads[pick_heads(rng)], (seed % 2) ? 1.0f : 6.0f);
        // Decode: a few sequences (auto partition kicks in for long ones),
        // then the same batch forced to slices of 3 blocks and never split.
        const int32_t seqs = std::uniform_int_distribution<int32_t>(1, 5)(rng);
        for (int32_t s = 0; s < seqs; ++s) c.context_lens.push_back(PickContext(bs, rng));
        c.seed = seed++;
        Run(c);
        c.partition_tokens = 3 * bs;
        Run(c);
        c.partition_tokens = -1;
        Run(c);
        // Prefill: chunks (query_len < context), whole prompts, decodes
        // (query_len 1) and empty queries mixed in one batch.
        Case pc = c;
        pc.context_lens.clear();
        const int32_t pseqs = std::uniform_int_distribution<int32_t>(1, 4)(rng);
        for (int32_t s = 0; s < pseqs; ++s) {
          int32_t ctx = std::uniform_int_distribution<int32_t>(1, hd == 256 ? 300 : 700)(rng);
          int32_t ql = 0;
          switch (std::uniform_int_distribution<int32_t>(0, 4)(rng)) {
            case 0: ql = ctx; break;                   // whole prompt
            case 1: ql = 1; break;                     // decode row
            case 2: ql = 0; ctx = ctx % 5; break;      // nothing to do
            default: ql = std::uniform_int_distribution<int32_t>(1, std::min(ctx, 150))(rng);
          }
          pc.context_lens.push_back(ctx);
          pc.query_lens.push_back(ql);
        }
        if (*std::max_element(pc.query_lens.begin(), pc.query_lens.end()) == 0) {
          pc.query_lens[0] = pc.context_lens[0] = 1;
        }
        pc.seed = seed++;
        Run(pc);
      }
    }
  }
  // Batches that fill the GPU (no automatic split) and GQA 32/8 at hd 128.
  for (CacheDtype dtype : dtypes) {
    Case c;
    c.dtype = dtype;
    c.num_kv_heads = 8;
    c.group = 4;
    c.block_size = 16;
    for (int32_t s = 0; s < 40; ++s) c.context_lens.push_back(PickContext(16, rng));
    c.seed = seed++;
    Run(c);
    // Long prefill chunk on top of a cached prefix, 32/8 heads.
    Case pc = c;
    pc.context_lens = {1500, 77, 900};
    pc.query_lens = {200, 77, 1};
    pc.seed = seed++;
    Run(pc);
  }
  // Tensor-core decode: every head_dim and block size, groups that pad the
  // 16-row tile (MHA forced onto it too), fill it, and need a second row
  // chunk; whole and split; and the same GQA batch forced onto CUDA cores.
  for (CacheDtype dtype : {CacheDtype::kFloat16, CacheDtype::kBFloat16}) {
    for (int32_t hd : {64, 128, 256}) {
      for (int32_t group : {1, 2, 7, 16, 24}) {
        Case c = ShapedCase(dtype, hd, 8 << (group % 3), Heads{2, group},
                            (seed % 2) ? 1.0f : 6.0f);
        for (int32_t s = 0; s < 3; ++s) c.context_lens.push_back(PickContext(c.block_size, rng));
        c.seed = seed++;
        c.kernel = group == 1 ? gpu::GpuDecodeKernel::kTensorCores : gpu::GpuDecodeKernel::kAuto;
        Run(c);
        c.partition_tokens = 4 * c.block_size;
        Run(c);
        c.kernel = gpu::GpuDecodeKernel::kTensorCoresPersistent;
        Run(c);
        if (group > 1) {
          c.kernel = gpu::GpuDecodeKernel::kSimt;
          Run(c);
        }
      }
    }
  }
  // Batches with about twice as many (sequence, KV head, slice) items as
  // tensor-core CTAs fit on the device (at most 4 per SM), so each
  // persistent CTA walks several items and its copies run from one item into
  // the next: short and empty contexts mixed, slices skipped by short
  // sequences, a window, two row chunks per KV head (hd 64); and the same
  // batches with one CTA per item.
  for (CacheDtype dtype : {CacheDtype::kFloat16, CacheDtype::kBFloat16}) {
    for (int32_t hd : {64, 128, 256}) {
      const Heads heads = hd == 64 ? Heads{2, 24} : Heads{8, 4};
      Case c = ShapedCase(dtype, hd, hd == 256 ? 32 : 16, heads, (seed % 2) ? 1.0f : 6.0f);
      const int32_t items_per_seq = heads.kv * (heads.group > 16 ? 2 : 1);
      const int32_t seqs = 2 * 4 * g_sms / items_per_seq;
      std::uniform_int_distribution<int32_t> len(0, 400);
      for (int32_t s = 0; s < seqs; ++s) c.context_lens.push_back(s % 17 == 0 ? s % 2 : len(rng));
      c.seed = seed++;
      c.kernel = gpu::GpuDecodeKernel::kTensorCoresPersistent;
      Run(c);
      c.partition_tokens = 8 * c.block_size;
      Run(c);
      c.sliding_window = 300;
      Run(c);
      c.kernel = gpu::GpuDecodeKernel::kTensorCores;
      Run(c);
    }
  }
  CheckSlidingWindows(rng, seed);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  char took[32];
  std::snprintf(took, sizeof(took), " (%.1f s)", secs);
  return gpu_check::Summary("attention_gpu_check", took);
}

}  // namespace
}  // namespace folio::kernels

int main() { return folio::kernels::Main(); }
