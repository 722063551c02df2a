// Keeps small fixed thread stacks workable in a process that holds the CUDA
// libraries.
//
// glibc places the static TLS of every library loaded at start-up at the top
// of each new thread's stack. The CUDA libraries folio-worker links bring
// ~120 KiB of it (cuBLASLt alone 92 KiB), and pthread_create refuses
// (EINVAL, before any thread exists) a stack that cannot hold it. civetweb,
// under prometheus-cpp's Exposer, asks for 100 KiB stacks, so the metrics
// server failed to start in every CUDA-enabled folio-worker.
//
// This definition interposes libc's pthread_attr_setstacksize for the whole
// process (the executable exports it: see worker/CMakeLists.txt) and raises
// requests below a floor that holds the TLS with room to spare. Larger
// requests pass through unchanged.
#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>

namespace {

constexpr size_t kStackFloorBytes = size_t{1} << 20;

using SetStackSizeFn = int (*)(pthread_attr_t*, size_t);

SetStackSizeFn RealSetStackSize() {
  static const SetStackSizeFn real =
      reinterpret_cast<SetStackSizeFn>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  return real;
}

}  // namespace

extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr, size_t stack_size) {
  const SetStackSizeFn real = RealSetStackSize();
  if (real == nullptr) return ENOSYS;
  return real(attr, std::max(stack_size, kStackFloorBytes));
}
