# Sanitizer builds: -DFOLIO_SANITIZE=address,undefined (ASan + UBSan) or
# -DFOLIO_SANITIZE=thread (TSan). Included by the top level before the CUDA
# check. tests/sanitizers/run.sh configures build-asan/ and build-tsan/ with it
# and runs the tests that the sanitizers cover (not yet part of `make test`).
#
# Every C/C++ object and every link gets -fsanitize=<list> and
# -fno-omit-frame-pointer (whole stacks in reports). UBSan findings abort
# (-fno-sanitize-recover=all) so that a finding fails its test instead of
# printing a line that nobody reads. The optimisation level comes from the
# build type and its flags as usual (run.sh uses -O1 -g1).
#
# CUDA is off in sanitizer builds: nvcc's device code and the static cudart
# are not instrumented, and the CUDA driver maps memory where ASan keeps its
# shadow. The CUDA code has its own checks on GPU machines (tests/gpu).

set(FOLIO_SANITIZE "" CACHE STRING
  "Build with sanitizers: empty (off), address,undefined or thread (comma-separated -fsanitize list)")

if(NOT FOLIO_SANITIZE)
  return()
endif()

if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  message(FATAL_ERROR "folio: FOLIO_SANITIZE needs GCC or Clang (have ${CMAKE_CXX_COMPILER_ID})")
endif()

string(REPLACE "," ";" _folio_sanitizers "${FOLIO_SANITIZE}")
foreach(_s IN LISTS _folio_sanitizers)
  if(NOT _s MATCHES "^(address|undefined|thread|leak)$")
    message(FATAL_ERROR "folio: FOLIO_SANITIZE: unknown sanitizer '${_s}' "
      "(use address, undefined, thread or leak)")
  endif()
endforeach()
if("thread" IN_LIST _folio_sanitizers AND
   ("address" IN_LIST _folio_sanitizers OR "leak" IN_LIST _folio_sanitizers))
  message(FATAL_ERROR "folio: FOLIO_SANITIZE: thread cannot be combined with address or leak")
endif()

string(REPLACE ";" "," _folio_sanitize_flag "${_folio_sanitizers}")
add_compile_options(
  "$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=${_folio_sanitize_flag}>"
  "$<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer>"
  "$<$<COMPILE_LANGUAGE:C,CXX>:-fno-sanitize-recover=all>")
add_link_options("-fsanitize=${_folio_sanitize_flag}")

if("thread" IN_LIST _folio_sanitizers)
  # The CPU kernels' SIMD clones (FOLIO_SIMD_CLONES, kernels/cpu/vec_math.h)
  # are picked by ifunc resolvers that the dynamic loader runs while it
  # relocates the executable, before the TSan runtime is set up; GCC
  # instruments those resolvers too, so every binary would segfault at
  # start. TSan builds compile the baseline loops only (the same source).
  add_compile_definitions(FOLIO_NO_SIMD_CLONES)
  # Debian's abseil is not built with TSan: absl::Mutex / CondVar /
  # Notification (ours and gRPC's) synchronize nothing TSan can see. This
  # library annotates them (the reasons and limits are in the file); linked
  # into every target made after this point, so it comes before abseil in
  # each executable's library order.
  add_library(folio_tsan_absl_sync SHARED
    ${PROJECT_SOURCE_DIR}/tests/sanitizers/tsan_absl_sync.cc)
  target_link_libraries(folio_tsan_absl_sync PRIVATE ${CMAKE_DL_LIBS})
  link_libraries(folio_tsan_absl_sync)
endif()

# A normal variable shadows the cached option for this build tree only.
set(FOLIO_ENABLE_CUDA OFF)
message(STATUS "folio: sanitizer build (-fsanitize=${_folio_sanitize_flag}); CUDA backend off")
