// CPU decode attention bandwidth: the paged kernel, the same kernel on a
// contiguous cache, and this machine's memory bandwidth, all in one run.
//
// Shape of issue 3: batch 32, context 1024, 32 query / 8 KV heads,
// head_dim 128, block size 16 (Llama-3-8B-like GQA), fp32. Each decode step
// reads the whole KV cache once: 32 * 1024 * 8 * 128 * 4 B * 2 (K and V) =
// 256 MiB, far beyond the last-level cache, so the kernel is memory-bound
// and "bandwidth" (KV bytes read per second, printed in G = 1e9) is its
// figure of merit.
// Targets: paged >= 60% of memcpy and >= 0.95x contiguous. The quantized
// cases (int8 / fp8 codes, a quarter of the bytes) should read at the same
// share of the bandwidth, so run ~4x faster than fp32.
//
// Baselines use the kernels' thread count (OpenMP):
//   BM_Memcpy    memcpy of a buffer the size of the KV read, split across the
//                threads; bandwidth counts the bytes copied (= buffer size), the
//                usual "memcpy bandwidth" (the bus carries the read and the
//                write, so a read-only kernel can beat it).
//   BM_MemRead   a summing read of the same buffer: the read-only ceiling.
// The paged pool's block ids are shuffled (no accidental contiguity).
// Arguments: seqs:N/ctx:C. The small seqs:4/ctx:128 shapes are the CTest smoke.
// A summary line per shape closes the run. Figures go to
// docs/performance.md; on a shared machine run with
//   --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/threads.h"

namespace folio::kernels::cpu {
namespace {

constexpr int32_t kNumHeads = 32;
constexpr int32_t kNumKvHeads = 8;
constexpr int32_t kHeadDim = 128;
constexpr int32_t kBlockSize = 16;

// Fast deterministic fill (the values do not matter for speed; touching
// every page before timing does).
void Fill(std::vector<float>& v, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& f : v) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    f = static_cast<float>(static_cast<int64_t>(x >> 40) - (1 << 23)) / (1 << 23);
  }
}

// One decode batch, built once per shape and shared by the benchmarks.
struct DecodeData {
  DecodeData(int32_t num_seqs, int32_t ctx) : num_seqs(num_seqs), ctx(ctx) {
    const int32_t blocks_per_seq = (ctx + kBlockSize - 1) / kBlockSize;
    num_blocks = num_seqs * blocks_per_seq;
    const int64_t token_elems = int64_t{kNumKvHeads} * kHeadDim;
    k_pool.resize(int64_t{num_blocks} * kBlockSize * token_elems);
    v_pool.resize(k_pool.size());
    Fill(k_pool, 1);
    Fill(v_pool, 2);
    std::vector<int32_t> ids(num_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(7));
    table = ids;  // row s = ids[s * blocks_per_seq ...]
    max_blocks = blocks_per_seq;
    k_contig.resize(int64_t{num_seqs} * ctx * token_elems);
    v_contig.resize(k_contig.size());
    Fill(k_contig, 3);
    Fill(v_contig, 4);
    context_lens.assign(num_seqs, ctx);
    q.resize(int64_t{num_seqs} * kNumHeads * kHeadDim);
    Fill(q, 5);
    out.resize(q.size());
    kv_bytes = 2.0 * num_seqs * ctx * token_elems * sizeof(float);

    std::string error;
    if (!ValidatePagedKvLayer(Paged(), &error) ||
        !ValidateHeadCounts(kNumHeads, kNumKvHeads, &error) ||
        !ValidateBlockTables(Tables(), context_lens.data(), kBlockSize, num_blocks, &error) ||
        !ValidateContiguousKvLayer(Contiguous(), &error) ||
        !ValidateContextLens(context_lens.data(), num_seqs, ctx, &error)) {
      std::fprintf(stderr, "invalid benchmark setup: %s\n", error.c_str());
      std::abort();
    }
  }

  PagedKvLayer Paged() const {
    return {k_pool.data(), v_pool.data(), num_blocks, kNumKvHeads, kBlockSize, kHeadDim};
  }
  BlockTables Tables() const { return {table.data(), num_seqs, max_blocks}; }
  ContiguousKvLayer Contiguous() const {
    return {k_contig.data(), v_contig.data(), num_seqs, kNumKvHeads, ctx, kHeadDim};
  }

  static DecodeData& Get(int32_t num_seqs, int32_t ctx) {
    static std::map<std::pair<int32_t, int32_t>, std::unique_ptr<DecodeData>> cache;
    auto& slot = cache[{num_seqs, ctx}];
    if (slot == nullptr) slot = std::make_unique<DecodeData>(num_seqs, ctx);
    return *slot;
  }

  int32_t num_seqs, ctx, num_blocks = 0, max_blocks = 0;
  std::vector<float> k_pool, v_pool, k_contig, v_contig, q, out;
  std::vector<int32_t> table, context_lens;
  double kv_bytes = 0;
};

void SetBandwidth(benchmark::State& state, double bytes_per_iteration) {
  state.counters["bandwidth"] =
      benchmark::Counter(bytes_per_iteration, benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::OneK::kIs1000);
  state.counters["threads"] = KernelThreads();
}

void BM_PagedDecode(benchmark::State& state) {
  DecodeData& d =
      DecodeData::Get(static_cast<int32_t>(state.range(0)), static_cast<int32_t>(state.range(1)));
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  for (auto _ : state) {
    PagedAttentionDecode(d.q.data(), d.Paged(), d.Tables(), d.context_lens.data(), kNumHeads, scale,
                         d.out.data());
    benchmark::DoNotOptimize(d.out.data());
    benchmark::ClobberMemory();
  }
  SetBandwidth(state, d.kv_bytes);
}

void BM_ContiguousDecode(benchmark::State& state) {
  DecodeData& d =
      DecodeData::Get(static_cast<int32_t>(state.range(0)), static_cast<int32_t>(state.range(1)));
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  for (auto _ : state) {
    ContiguousAttentionDecode(d.q.data(), d.Contiguous(), d.context_lens.data(), kNumHeads, scale,
                              d.out.data());
    benchmark::DoNotOptimize(d.out.data());
    benchmark::ClobberMemory();
  }
  SetBandwidth(state, d.kv_bytes);
}

// The same batch over a quantized cache (int8 or fp8 e4m3 codes, per-block
// per-KV-head scales): "bandwidth" counts the bytes it actually reads
// (codes and scales), "speedup" is the fp32 paged kernel's time over this
// one's, measured here in alternation (same machine, same moment).
struct QuantizedData {
  QuantizedData(const DecodeData& d, CacheDtype dtype) : dtype(dtype) {
    const CacheShape shape{kNumKvHeads, kBlockSize, kHeadDim};
    block_bytes = BlockBytes(shape, dtype);
    k_pool.resize(d.num_blocks * block_bytes / 4);
    v_pool.resize(k_pool.size());
    uint64_t x = 11;
    for (std::vector<float>* pool : {&k_pool, &v_pool}) {
      uint8_t* bytes = reinterpret_cast<uint8_t*>(pool->data());
      for (int64_t b = 0; b < d.num_blocks; ++b) {
        uint8_t* block = bytes + b * block_bytes;
        for (int64_t i = 0; i < BlockElems(shape); ++i) {
          x ^= x << 13, x ^= x >> 7, x ^= x << 17;
          block[i] = static_cast<uint8_t>(x >> 56) & 0xbf;  // no fp8 NaN, no huge values
        }
        for (int32_t h = 0; h < kNumKvHeads; ++h) {
          const float scale = 0.01f;
          std::memcpy(block + BlockElems(shape) + 4 * h, &scale, 4);
        }
      }
    }
    kv_bytes = 2.0 * d.num_seqs * ((d.ctx + kBlockSize - 1) / kBlockSize) * block_bytes;
  }
  PagedKvLayer Paged(const DecodeData& d) const {
    return {k_pool.data(), v_pool.data(), d.num_blocks, kNumKvHeads, kBlockSize, kHeadDim, dtype};
  }
  CacheDtype dtype;
  int64_t block_bytes = 0;
  std::vector<float> k_pool, v_pool;
  double kv_bytes = 0;
};

void BM_PagedDecodeQuantized(benchmark::State& state, CacheDtype dtype) {
  DecodeData& d =
      DecodeData::Get(static_cast<int32_t>(state.range(0)), static_cast<int32_t>(state.range(1)));
  const QuantizedData qd(d, dtype);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  double quantized_s = 0, fp32_s = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    PagedAttentionDecode(d.q.data(), qd.Paged(d), d.Tables(), d.context_lens.data(), kNumHeads,
                         scale, d.out.data());
    benchmark::DoNotOptimize(d.out.data());
    benchmark::ClobberMemory();
    auto t1 = std::chrono::steady_clock::now();
    state.PauseTiming();
    PagedAttentionDecode(d.q.data(), d.Paged(), d.Tables(), d.context_lens.data(), kNumHeads, scale,
                         d.out.data());
    benchmark::ClobberMemory();
    auto t2 = std::chrono::steady_clock::now();
    state.ResumeTiming();
    quantized_s += std::chrono::duration<double>(t1 - t0).count();
    fp32_s += std::chrono::duration<double>(t2 - t1).count();
  }
  SetBandwidth(state, qd.kv_bytes);
  state.counters["speedup"] = fp32_s / quantized_s;
}

// Buffers of the KV read's size for the bandwidth baselines.
struct Buffers {
  explicit Buffers(int64_t floats) : src(floats), dst(floats) {
    Fill(src, 8);
    Fill(dst, 9);
  }
  static Buffers& Get(int64_t floats) {
    static std::map<int64_t, std::unique_ptr<Buffers>> cache;
    auto& slot = cache[floats];
    if (slot == nullptr) slot = std::make_unique<Buffers>(floats);
    return *slot;
  }
  std::vector<float> src, dst;
};

int64_t KvFloats(const benchmark::State& state) {
  return 2 * state.range(0) * state.range(1) * int64_t{kNumKvHeads} * kHeadDim;
}

void BM_Memcpy(benchmark::State& state) {
  const int64_t n = KvFloats(state);
  Buffers& b = Buffers::Get(n);
  const int64_t chunks = KernelThreads();
  for (auto _ : state) {
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t lo = n * c / chunks, hi = n * (c + 1) / chunks;
      std::memcpy(b.dst.data() + lo, b.src.data() + lo, (hi - lo) * sizeof(float));
    }
    benchmark::ClobberMemory();
  }
  SetBandwidth(state, static_cast<double>(n) * sizeof(float));
}

void BM_MemRead(benchmark::State& state) {
  const int64_t n = KvFloats(state);
  Buffers& b = Buffers::Get(n);
  const float* src = b.src.data();
  for (auto _ : state) {
    float total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total)
    for (int64_t c = 0; c < 64; ++c) {  // 64 slices, 4 interleaved streams each
      const int64_t lo = n * c / 64, quarter = (n * (c + 1) / 64 - lo) / 4;
      const float* p = src + lo;
      float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
      for (int64_t i = 0; i < quarter; ++i) {
        s0 += p[i];
        s1 += p[i + quarter];
        s2 += p[i + 2 * quarter];
        s3 += p[i + 3 * quarter];
      }
      total += (s0 + s1) + (s2 + s3);
    }
    benchmark::DoNotOptimize(total);
  }
  SetBandwidth(state, static_cast<double>(n) * sizeof(float));
}

void Shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"seqs", "ctx"});
  b->Args({32, 1024});
  b->Args({4, 128});
  b->UseRealTime();
  b->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_PagedDecode)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_PagedDecodeQuantized, int8, CacheDtype::kInt8)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_PagedDecodeQuantized, fp8, CacheDtype::kFp8E4m3)->Apply(Shapes);
BENCHMARK(BM_ContiguousDecode)->Apply(Shapes);
BENCHMARK(BM_Memcpy)->Apply(Shapes);
BENCHMARK(BM_MemRead)->Apply(Shapes);

// Prefill: one sequence's whole prompt of `tokens` query tokens in one call
// (causal, from a paged cache with shuffled blocks), the shape of a long
// prompt's first step. Figure of merit: arithmetic, in GFLOP/s =
// 4 * heads * head_dim * tokens * (tokens + 1) / 2 (QK^T and PV, a
// multiply-add counted as 2) per second.
// Arguments: tokens/heads/kv_heads/head_dim.
struct PrefillData {
  PrefillData(int32_t tokens, int32_t heads, int32_t kv_heads, int32_t hd)
      : tokens(tokens), heads(heads), kv_heads(kv_heads), hd(hd) {
    num_blocks = (tokens + kBlockSize - 1) / kBlockSize;
    const int64_t token_elems = int64_t{kv_heads} * hd;
    k_pool.resize(int64_t{num_blocks} * kBlockSize * token_elems);
    v_pool.resize(k_pool.size());
    Fill(k_pool, 11);
    Fill(v_pool, 12);
    table.resize(num_blocks);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(3));
    q.resize(int64_t{tokens} * heads * hd);
    Fill(q, 13);
    out.resize(q.size());
    query_start = {0, tokens};
    context_lens = {tokens};
    std::string error;
    if (!ValidatePagedKvLayer(Paged(), &error) || !ValidateHeadCounts(heads, kv_heads, &error) ||
        !ValidateBlockTables(Tables(), context_lens.data(), kBlockSize, num_blocks, &error)) {
      std::fprintf(stderr, "invalid benchmark setup: %s\n", error.c_str());
      std::abort();
    }
  }
  PagedKvLayer Paged() const {
    return {k_pool.data(), v_pool.data(), num_blocks, kv_heads, kBlockSize, hd};
  }
  BlockTables Tables() const { return {table.data(), 1, num_blocks}; }

  int32_t tokens, heads, kv_heads, hd, num_blocks = 0;
  std::vector<float> k_pool, v_pool, q, out;
  std::vector<int32_t> table, query_start, context_lens;
};

void BM_PagedPrefill(benchmark::State& state) {
  PrefillData d(static_cast<int32_t>(state.range(0)), static_cast<int32_t>(state.range(1)),
                static_cast<int32_t>(state.range(2)), static_cast<int32_t>(state.range(3)));
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.hd));
  for (auto _ : state) {
    PagedAttentionPrefill(d.q.data(), d.Paged(), d.Tables(), d.query_start.data(),
                          d.context_lens.data(), d.heads, scale, d.out.data());
    benchmark::DoNotOptimize(d.out.data());
    benchmark::ClobberMemory();
  }
  const double flops = 4.0 * d.heads * d.hd * (double(d.tokens) * (d.tokens + 1) / 2);
  state.counters["flops"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate,
                                               benchmark::Counter::OneK::kIs1000);
  state.counters["threads"] = KernelThreads();
}

BENCHMARK(BM_PagedPrefill)
    ->ArgNames({"tokens", "heads", "kv_heads", "head_dim"})
    ->Args({1024, 4, 2, 64})    // the demo model's attention shape
    ->Args({2048, 4, 2, 64})
    ->Args({1024, 32, 8, 128})  // Llama-3-8B-like
    ->Args({64, 4, 2, 64})      // CTest smoke
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The console output plus, at the end, each shape's figures against the
// targets: paged / memcpy and paged / contiguous (medians when run with
// --benchmark_repetitions, else the single run).
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  SummaryReporter() : ConsoleReporter(isatty(STDOUT_FILENO) ? OO_Color : OO_None) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    benchmark::ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (run.run_type == Run::RT_Aggregate && !median) continue;
      auto it = run.counters.find("bandwidth");
      if (it == run.counters.end()) continue;
      Figure& f = figures_[run.run_name.args][run.run_name.function_name];
      if (median || !f.median) f = {it->second.value / 1e9, median};
    }
  }

  void Finalize() override {
    benchmark::ConsoleReporter::Finalize();
    for (auto& [shape, by_name] : figures_) {
      const double paged = by_name["BM_PagedDecode"].gbps;
      const double contig = by_name["BM_ContiguousDecode"].gbps;
      const double copy = by_name["BM_Memcpy"].gbps;
      const double read = by_name["BM_MemRead"].gbps;
      if (paged <= 0 || contig <= 0 || copy <= 0) continue;
      // The targets are set for the shape, whose KV read (256 MiB)
      // is far beyond the caches; smaller shapes run from cache.
      const bool target_shape = shape == "seqs:32/ctx:1024";
      std::printf(
          "%s: paged %.2f GB/s = %.0f%% of memcpy %.2f GB/s%s, %.3fx contiguous %.2f GB/s%s; "
          "read-only ceiling %.2f GB/s\n",
          shape.c_str(), paged, 100 * paged / copy, copy, target_shape ? " (target >= 60%)" : "",
          paged / contig, contig, target_shape ? " (target >= 0.95x)" : "", read);
    }
  }

 private:
  struct Figure {
    double gbps = 0;
    bool median = false;
  };
  std::map<std::string, std::map<std::string, Figure>> figures_;
};

}  // namespace
}  // namespace folio::kernels::cpu

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  folio::kernels::cpu::SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
