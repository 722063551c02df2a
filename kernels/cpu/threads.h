// One thread pool for all CPU compute: the kernels' OpenMP threads. The
// worker's GEMMs (PackedGemm) run on the same threads, so two pools never
// busy-wait against each other on the same cores.
#ifndef FOLIO_KERNELS_CPU_THREADS_H_
#define FOLIO_KERNELS_CPU_THREADS_H_

#include <cstdint>
#include <functional>

namespace folio::kernels::cpu {

// Threads for the parallel regions the calling thread starts from now on
// (OpenMP's nthreads ICV is per calling thread: call it on the thread that
// runs the kernels). n <= 0: DefaultKernelThreads(). No-op without OpenMP.
void SetKernelThreads(int32_t n);

// Threads the kernels of this library use (OpenMP's max threads; 1 without
// OpenMP).
int32_t KernelThreads();

// The hardware concurrency (at least 1).
int32_t HardwareThreads();

// OMP_NUM_THREADS (its first entry) when set to a positive number, else the
// hardware concurrency: so a process started with OMP_NUM_THREADS=N (a
// tensor-parallel rank sharing the machine) computes on N threads.
int32_t DefaultKernelThreads();

// fn(i) for i in [0, n), spread over the kernel threads (static schedule);
// inline when n == 1. fn must be safe to call concurrently.
void ParallelFor(int64_t n, const std::function<void(int64_t)>& fn);

}  // namespace folio::kernels::cpu

#endif  // FOLIO_KERNELS_CPU_THREADS_H_
