#include "common/openmp_env.h"

#include <unistd.h>

#include <cstdlib>

namespace folio {

void UsePassiveOpenMpWaitByDefault(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0) != 0) return;
  execv("/proc/self/exe", argv);
  // exec failed: carry on with OpenMP's default policy.
}

}  // namespace folio
