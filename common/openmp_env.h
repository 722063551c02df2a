#ifndef FOLIO_COMMON_OPENMP_ENV_H_
#define FOLIO_COMMON_OPENMP_ENV_H_

namespace folio {

// OpenMP reads OMP_WAIT_POLICY and GOMP_SPINCOUNT once, as the process
// loads. Its default lets idle kernel threads spin for milliseconds after
// every parallel region; between engine steps (waiting on the network, or on
// the next plan) they then burn the cores that gRPC and the other ranks need
// — on a few shared cores a worker spent 73% of its time spinning. Never
// spinning is no better: a decode step runs a dozen short parallel regions,
// and waking sleeping threads for each cost the 7.5M-parameter model half
// its decode speed (1.8 against 0.9 ms a token; docs/performance.md). So
// folio's compute binaries start with PASSIVE and GOMP_SPINCOUNT=20000 (about
// 0.2 ms of spinning before a thread sleeps; none when threads outnumber the
// cores) unless OMP_WAIT_POLICY is set: when it is unset this re-executes
// the program with both set (once). Call first thing in main(), before any
// thread starts. Returns only when no re-execution happened (already set, or
// exec failed).
void UsePassiveOpenMpWaitByDefault(char** argv);

}  // namespace folio

#endif  // FOLIO_COMMON_OPENMP_ENV_H_
