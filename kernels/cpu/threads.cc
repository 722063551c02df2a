#include "kernels/cpu/threads.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace folio::kernels::cpu {

int32_t HardwareThreads() {
  return std::max<int32_t>(1, static_cast<int32_t>(std::thread::hardware_concurrency()));
}

int32_t DefaultKernelThreads() {
  // OMP_NUM_THREADS may be a list ("4,2"): its first entry is the outer level.
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env != nullptr) {
    const long n = std::strtol(env, nullptr, 10);
    if (n > 0) return static_cast<int32_t>(std::min<long>(n, 1 << 16));
  }
  return HardwareThreads();
}

void SetKernelThreads(int32_t n) {
#ifdef _OPENMP
  omp_set_num_threads(n > 0 ? n : DefaultKernelThreads());
#else
  (void)n;
#endif
}

int32_t KernelThreads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

void ParallelFor(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 1) {
    if (n == 1) fn(0);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) fn(i);
}

}  // namespace folio::kernels::cpu
