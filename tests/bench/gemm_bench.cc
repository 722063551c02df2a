// The CPU linear layers' GEMM: PackedGemm (weights packed once, fp32 / bf16
// / int8) against OpenBLAS sgemm on the row-major weights (what ModelRunner
// called before), at decode and prefill row counts, and this machine's FLOP
// peak and memory read bandwidth in the same run.
//
// Shapes (out features x in features) are the linear layers of the issue's
// two benchmark models: the Llama-3-shaped 7.5M (hidden 512, 4/1 heads of
// 128, intermediate 1536, vocab 1459) and the Llama-shaped 93M (hidden 1024,
// 16/4 heads of 64, intermediate 2816, vocab 32000).
// Counters: GFLOP/s (2·M·N·K per call) and weight GB/s (stored weight bytes
// per call / time, G = 1e9: the figure of merit at decode, where every
// weight byte is read once per step). Threads: the kernels' (OpenMP), with
// OpenBLAS on the same count. Figures go to docs/performance.md.
#include <benchmark/benchmark.h>
#include <cblas.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/threads.h"

namespace folio::kernels::cpu {
namespace {

struct Operands {
  int32_t m, n, k;
  std::vector<float> x, w, out;
};

Operands Make(const benchmark::State& state) {
  Operands o{static_cast<int32_t>(state.range(0)), static_cast<int32_t>(state.range(1)),
             static_cast<int32_t>(state.range(2)), {}, {}, {}};
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  o.x.resize(size_t(o.m) * o.k);
  o.w.resize(size_t(o.n) * o.k);
  for (float& v : o.x) v = dist(rng);
  for (float& v : o.w) v = dist(rng);
  o.out.resize(size_t(o.m) * o.n);
  return o;
}

void SetCounters(benchmark::State& state, const Operands& o, double weight_bytes) {
  const double iters = static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * o.m * o.n * o.k * iters / 1e9,
                                                 benchmark::Counter::kIsRate);
  state.counters["weight_GB/s"] =
      benchmark::Counter(weight_bytes * iters / 1e9, benchmark::Counter::kIsRate);
  state.counters["threads"] = KernelThreads();
}

void BM_OpenBlas(benchmark::State& state) {
  Operands o = Make(state);
  openblas_set_num_threads(KernelThreads());
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, o.m, o.n, o.k, 1.0f, o.x.data(), o.k,
                o.w.data(), o.k, 0.0f, o.out.data(), o.n);
    benchmark::DoNotOptimize(o.out.data());
  }
  SetCounters(state, o, 4.0 * o.n * o.k);
}

// isa: "best" (what the runner uses) or a cap ("avx2") for a same-run comparison.
void BM_Packed(benchmark::State& state, WeightType type, const char* isa) {
  Operands o = Make(state);
  const PackedMatrix w = PackedMatrix::Pack(o.w.data(), o.n, o.k, type);
  SetPackedGemmIsaForTesting(isa);
  for (auto _ : state) {
    PackedGemm(o.x.data(), o.m, w, o.out.data());
    benchmark::DoNotOptimize(o.out.data());
  }
  state.SetLabel(std::string(PackedGemmIsa()));
  SetPackedGemmIsaForTesting("best");
  SetCounters(state, o, static_cast<double>(w.bytes()));
}

// rows x (out, in) for every layer shape of both models.
void Shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "N", "K"});
  const std::vector<std::pair<int32_t, int32_t>> layers = {
      {768, 512}, {512, 512}, {3072, 512}, {512, 1536}, {1459, 512},             // 7.5M
      {1536, 1024}, {1024, 1024}, {5632, 1024}, {1024, 2816}, {32000, 1024}};  // 93M
  for (int32_t m : {1, 4, 16, 32, 256}) {
    for (const auto& [n, k] : layers) b->Args({m, n, k});
  }
}

BENCHMARK(BM_OpenBlas)->Apply(Shapes)->UseRealTime();
BENCHMARK_CAPTURE(BM_Packed, f32, WeightType::kFloat32, "best")->Apply(Shapes)->UseRealTime();
BENCHMARK_CAPTURE(BM_Packed, bf16, WeightType::kBFloat16, "best")->Apply(Shapes)->UseRealTime();
BENCHMARK_CAPTURE(BM_Packed, int8, WeightType::kInt8, "best")->Apply(Shapes)->UseRealTime();
BENCHMARK_CAPTURE(BM_Packed, f32_avx2, WeightType::kFloat32, "avx2")->Apply(Shapes)->UseRealTime();

// One step's linear layers of the 93M model (8 layers of qkv, o, gate_up and
// down, then the lm head): 357 MB of distinct fp32 weights, far beyond the
// last-level cache, so every call streams its weights from memory as a real
// step does (the per-shape cases above reuse one matrix that may stay cached).
// GFLOP/s over the step is the figure issue 19's "decode GEMMs at >= 50% of
// the FLOP peak" asks for at M = 32; M = 256 is a prefill chunk.
void BM_PackedStep93M(benchmark::State& state) {
  const int32_t m = static_cast<int32_t>(state.range(0));
  const std::vector<std::pair<int32_t, int32_t>> layer = {{1536, 1024}, {1024, 1024}, {5632, 1024},
                                                          {1024, 2816}};
  std::vector<PackedMatrix> weights;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  double flops = 0, bytes = 0;
  int32_t widest = 0;
  auto add = [&](int32_t n, int32_t k) {
    std::vector<float> w(size_t(n) * k);
    for (float& v : w) v = dist(rng);
    weights.push_back(PackedMatrix::Pack(w.data(), n, k, WeightType::kFloat32));
    flops += 2.0 * m * n * k;
    bytes += static_cast<double>(weights.back().bytes());
    widest = std::max({widest, n, k});
  };
  for (int32_t l = 0; l < 8; ++l) {
    for (const auto& [n, k] : layer) add(n, k);
  }
  add(2048, 1024);
  std::vector<float> x(size_t(m) * widest), out(size_t(m) * widest);
  for (float& v : x) v = dist(rng);
  for (auto _ : state) {
    for (const PackedMatrix& w : weights) PackedGemm(x.data(), m, w, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] = benchmark::Counter(flops * iters / 1e9, benchmark::Counter::kIsRate);
  state.counters["weight_GB/s"] = benchmark::Counter(bytes * iters / 1e9, benchmark::Counter::kIsRate);
  state.counters["threads"] = KernelThreads();
  state.SetLabel(std::string(PackedGemmIsa()));
}
BENCHMARK(BM_PackedStep93M)->Arg(1)->Arg(32)->Arg(256)->ArgName("M")->UseRealTime()->Unit(
    benchmark::kMillisecond);

// The machine's FLOP rate as OpenBLAS reaches it on a large square product
// (a practical GEMM figure; the arithmetic peak is BM_FmaPeak).
void BM_FlopPeak(benchmark::State& state) {
  const int32_t n = static_cast<int32_t>(state.range(0));
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
  openblas_set_num_threads(KernelThreads());
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(),
                n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
  state.counters["threads"] = KernelThreads();
}
BENCHMARK(BM_FlopPeak)->Arg(2048)->ArgName("n")->UseRealTime()->Unit(benchmark::kMillisecond);

// Memory read bandwidth: a summing read of 1 GiB on the kernel threads,
// four AVX2 accumulators (the loads, not the adds, are the limit).
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) float SumAvx2(const float* v, int64_t lo, int64_t hi) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (int64_t i = lo; i + 32 <= hi; i += 32) {
    s0 = _mm256_add_ps(s0, _mm256_loadu_ps(v + i));
    s1 = _mm256_add_ps(s1, _mm256_loadu_ps(v + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_loadu_ps(v + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_loadu_ps(v + i + 24));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  float s = 0;
  for (float x : lanes) s += x;
  return s;
}

void BM_MemRead(benchmark::State& state) {
  const int64_t n = int64_t{1} << 28;
  std::vector<float> v(n, 1.0f);
  const int64_t chunks = KernelThreads();
  std::vector<float> sums(chunks);
  for (auto _ : state) {
    ParallelFor(chunks, [&](int64_t c) { sums[c] = SumAvx2(v.data(), n * c / chunks, n * (c + 1) / chunks); });
    benchmark::DoNotOptimize(sums.data());
  }
  state.counters["GB/s"] = benchmark::Counter(4.0 * n * state.iterations() / 1e9,
                                              benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MemRead)->UseRealTime()->Unit(benchmark::kMillisecond);

// The cores' arithmetic peak: chains of independent FMAs on registers only,
// on every kernel thread, 512-bit where the CPU has AVX-512 (a core with a
// 256-bit FMA datapath runs them at half rate, which this counts right).
// 12 chains hide the FMA latency (4 cycles) at two FMAs a cycle.
// One macro body for both widths (a generic template would not inline the
// target-specific intrinsics); twelve named accumulators, so they stay in
// registers.
#define FOLIO_FMA_CHAINS(V, SET, FMA, LANE0)                                          \
  const V a = SET(0.999999f), b = SET(1e-7f);                                         \
  V c0 = SET(0), c1 = SET(1), c2 = SET(2), c3 = SET(3), c4 = SET(4), c5 = SET(5);     \
  V c6 = SET(6), c7 = SET(7), c8 = SET(8), c9 = SET(9), c10 = SET(10), c11 = SET(11); \
  for (int64_t it = 0; it < iterations; ++it) {                                       \
    c0 = FMA(c0, a, b), c1 = FMA(c1, a, b), c2 = FMA(c2, a, b), c3 = FMA(c3, a, b);   \
    c4 = FMA(c4, a, b), c5 = FMA(c5, a, b), c6 = FMA(c6, a, b), c7 = FMA(c7, a, b);   \
    c8 = FMA(c8, a, b), c9 = FMA(c9, a, b), c10 = FMA(c10, a, b);                     \
    c11 = FMA(c11, a, b);                                                             \
  }                                                                                   \
  return LANE0(c0) + LANE0(c1) + LANE0(c2) + LANE0(c3) + LANE0(c4) + LANE0(c5) +      \
         LANE0(c6) + LANE0(c7) + LANE0(c8) + LANE0(c9) + LANE0(c10) + LANE0(c11);
__attribute__((target("avx512f"))) float Chains512(int64_t iterations) {
  FOLIO_FMA_CHAINS(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_cvtss_f32)
}
__attribute__((target("avx2,fma"))) float Chains256(int64_t iterations) {
  FOLIO_FMA_CHAINS(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_cvtss_f32)
}
#undef FOLIO_FMA_CHAINS

void BM_FmaPeak(benchmark::State& state) {
  const bool wide = HaveAvx512();
  constexpr int64_t kIterations = 1 << 22;
  const int64_t threads = KernelThreads();
  std::vector<float> sums(threads);
  for (auto _ : state) {
    ParallelFor(threads, [&](int64_t t) {
      sums[t] = wide ? Chains512(kIterations) : Chains256(kIterations);
    });
    benchmark::DoNotOptimize(sums.data());
  }
  const double flops_per_call = 2.0 * 12 * (wide ? 16 : 8) * kIterations * threads;
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops_per_call * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(wide ? "avx512" : "avx2");
}
BENCHMARK(BM_FmaPeak)->UseRealTime()->Unit(benchmark::kMillisecond);
#endif

}  // namespace
}  // namespace folio::kernels::cpu

BENCHMARK_MAIN();
