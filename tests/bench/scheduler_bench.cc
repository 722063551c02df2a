// Cost of one scheduler iteration — Schedule() + plan build + Update() — with
// N running decode sequences and prefix caching on. vLLM's Python scheduler
// spends ~2-2.5 ms per step; folio's budget is 50 us at 256 sequences (1% of
// a 5 ms GPU step). Figures go to docs/performance.md.

#include <benchmark/benchmark.h>

#include "steady_decode.h"

namespace folio {
namespace {

using bench::SteadyDecode;

void BM_SchedulerStep(benchmark::State& state) {
  SteadyDecode engine(static_cast<int32_t>(state.range(0)));
  size_t scheduled = 0;
  for (auto _ : state) scheduled += engine.Step();
  state.counters["seqs_per_step"] =
      benchmark::Counter(static_cast<double>(scheduled) / static_cast<double>(state.iterations()));
  state.counters["us_per_seq"] = benchmark::Counter(
      static_cast<double>(scheduled), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["us_per_seq"] = state.counters["us_per_seq"];
}
BENCHMARK(BM_SchedulerStep)->Arg(16)->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace folio

BENCHMARK_MAIN();
