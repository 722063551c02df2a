#include "common/openmp_env.h"

#include <unistd.h>

#include <cstdlib>

namespace folio {

void UsePassiveOpenMpWaitByDefault(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0) != 0) return;
  // libgomp counts ~100000 spins per ms: spin ~0.2 ms, then sleep.
  if (setenv("GOMP_SPINCOUNT", "20000", /*overwrite=*/0) != 0) return;
  // The binary's real path, so the process keeps its name (ps, pkill).
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return;
  path[n] = '\0';
  execv(path, argv);
  // exec failed: carry on with OpenMP's default policy.
}

}  // namespace folio
