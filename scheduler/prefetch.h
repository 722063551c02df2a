#ifndef FOLIO_SCHEDULER_PREFETCH_H_
#define FOLIO_SCHEDULER_PREFETCH_H_

namespace folio {

// Asks the CPU to bring the cache line holding `p` closer; never faults, so
// any address (one past the end of a vector included) is fine.
//
// Not __builtin_prefetch: GCC 12 drops it from some loops whose addresses
// come through a std::deque (the scheduler's queues), silently. A volatile
// asm is kept wherever it is written.
inline void PrefetchLine(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 (%0)" : : "r"(p));
#else
  __builtin_prefetch(p);
#endif
}

}  // namespace folio

#endif  // FOLIO_SCHEDULER_PREFETCH_H_
