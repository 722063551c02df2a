// PRIVATE to the CPU attention kernels, through kernels/cpu/attention_internal.h
// (which says why everything here is inline, static or in an anonymous
// namespace); include it nowhere else.
#ifndef FOLIO_KERNELS_CPU_ATTENTION_PREFETCH_H_
#define FOLIO_KERNELS_CPU_ATTENTION_PREFETCH_H_

#include <algorithm>
#include <cstdint>

namespace folio::kernels::cpu::attention_internal {
namespace {  // NOLINT(google-build-namespaces): private header

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
  // Spreads [p, p + bytes) over about `steps` calls of Step().
  void Reset(const void* p, int64_t bytes, int32_t steps) {
    next_ = static_cast<const char*>(p);
    end_ = next_ + bytes;
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

}  // namespace
}  // namespace folio::kernels::cpu::attention_internal

#endif  // FOLIO_KERNELS_CPU_ATTENTION_PREFETCH_H_
