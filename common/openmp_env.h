#ifndef FOLIO_COMMON_OPENMP_ENV_H_
#define FOLIO_COMMON_OPENMP_ENV_H_

namespace folio {

// OpenMP reads OMP_WAIT_POLICY once, as the process loads. Its default lets
// idle kernel threads spin for a while after every parallel region; between
// engine steps (waiting on the network, or on the next plan) they then burn
// the cores that gRPC, the other ranks and OpenBLAS need — on a few shared
// cores a worker spent 73% of its time spinning. So folio's compute binaries
// start with PASSIVE unless the environment says otherwise: when the
// variable is unset this re-executes the program with it set (once). Call
// first thing in main(), before any thread starts. Returns only when no
// re-execution happened (already set, or exec failed).
void UsePassiveOpenMpWaitByDefault(char** argv);

}  // namespace folio

#endif  // FOLIO_COMMON_OPENMP_ENV_H_
