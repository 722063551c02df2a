# Sanitizer builds: -DFOLIO_SANITIZE=address,undefined (ASan + UBSan) or
# -DFOLIO_SANITIZE=thread (TSan). Included by the top level before the CUDA
# check. tests/sanitizers/run.sh configures build-asan/ and build-tsan/ with it
# and runs the tests that the sanitizers cover (`make test` runs it last).
#
# Every C/C++ object and every link gets -fsanitize=<list> and
# -fno-omit-frame-pointer (whole stacks in reports). UBSan findings abort
# (-fno-sanitize-recover=all) so that a finding fails its test instead of
# printing a line that nobody reads. The optimisation level comes from the
# build type and its flags as usual, and FOLIO_TESTS_OPT for the test files
# (tests/CMakeLists.txt; run.sh sets the levels it uses and why).
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
  # Debian's abseil and gRPC are not built with TSan: absl::Mutex / CondVar /
  # Notification (ours and gRPC's) and the hand-over of a gRPC call's batch
  # to the thread that completes it synchronize nothing TSan can see. This
  # library annotates them (the reasons and limits are in the file). Every
  # target made after this point links it, and every executable names it
  # first on its link line (link options come before the objects and
  # libraries), so that it precedes abseil and gRPC in the executable's
  # library order and its definitions are the ones that calls bind to.
  add_library(folio_tsan_annotations SHARED
    ${PROJECT_SOURCE_DIR}/tests/sanitizers/tsan_annotations.cc)
  target_link_libraries(folio_tsan_annotations PRIVATE ${CMAKE_DL_LIBS})
  link_libraries(folio_tsan_annotations)
  add_link_options(
    "$<$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>:$<TARGET_FILE:folio_tsan_annotations>>")
endif()

# A normal variable shadows the cached option for this build tree only.
set(FOLIO_ENABLE_CUDA OFF)
message(STATUS "folio: sanitizer build (-fsanitize=${_folio_sanitize_flag}); CUDA backend off")
