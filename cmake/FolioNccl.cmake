# NCCL, for the CUDA workers' collectives. Included by the top level after the
# CUDA check, before the FOLIO_KERNELS_ONLY cut-off.
#
# Looks for nccl.h and libnccl next to the CUDA toolkit (/usr/local/cuda ships
# them on our machines), under $NCCL_ROOT or $NCCL_HOME, then in the system
# paths. Sets FOLIO_HAVE_NCCL and, when found, defines folio_nccl_group
# (worker/nccl_group.{h,cc}): CUDA runtime + NCCL + the C++ standard library
# only, so that it builds in kernels-only mode too and tests/gpu can check it
# on GPU machines without our Debian packages. The absl/gRPC-facing
# NcclCommunicator on top of it (worker/CMakeLists.txt) builds only in the full
# build. Without CUDA or NCCL everything NCCL is skipped with a status message.

set(FOLIO_HAVE_NCCL OFF)
if(FOLIO_HAVE_CUDA)
  find_path(FOLIO_NCCL_INCLUDE_DIR nccl.h
    HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_ROOT ENV NCCL_HOME
    PATH_SUFFIXES include)
  find_library(FOLIO_NCCL_LIBRARY NAMES nccl libnccl.so.2
    HINTS ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_ROOT ENV NCCL_HOME
    PATH_SUFFIXES lib64 lib)
  if(FOLIO_NCCL_INCLUDE_DIR AND FOLIO_NCCL_LIBRARY)
    file(STRINGS "${FOLIO_NCCL_INCLUDE_DIR}/nccl.h" _folio_nccl_defines
      REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
    set(_folio_nccl_version "")
    foreach(_part MAJOR MINOR PATCH)
      string(REGEX MATCH "NCCL_${_part} +([0-9]+)" _m "${_folio_nccl_defines}")
      list(APPEND _folio_nccl_version "${CMAKE_MATCH_1}")
    endforeach()
    list(JOIN _folio_nccl_version "." _folio_nccl_version)
    # Non-blocking communicators (ncclConfig_t.blocking), ncclCommFinalize and
    # ncclGetLastError: NCCL 2.14.
    if(_folio_nccl_version VERSION_LESS 2.14)
      message(STATUS "folio: NCCL ${_folio_nccl_version} at ${FOLIO_NCCL_LIBRARY} is older than 2.14; NCCL communicator skipped")
    else()
      set(FOLIO_HAVE_NCCL ON)
      message(STATUS "folio: NCCL ${_folio_nccl_version} found (${FOLIO_NCCL_LIBRARY}); NCCL communicator enabled")
    endif()
  else()
    message(STATUS "folio: NCCL not found (nccl.h / libnccl; set NCCL_ROOT); NCCL communicator skipped")
  endif()
endif()

if(FOLIO_HAVE_NCCL)
  find_package(Threads REQUIRED)
  add_library(folio_nccl_group STATIC ${PROJECT_SOURCE_DIR}/worker/nccl_group.cc)
  target_include_directories(folio_nccl_group PUBLIC ${PROJECT_SOURCE_DIR})
  target_include_directories(folio_nccl_group SYSTEM PUBLIC ${FOLIO_NCCL_INCLUDE_DIR})
  target_compile_features(folio_nccl_group PUBLIC cxx_std_20)
  # Static cudart like the kernels (one runtime per process); libnccl is shared.
  target_link_libraries(folio_nccl_group PUBLIC CUDA::cudart_static ${FOLIO_NCCL_LIBRARY}
    Threads::Threads)
endif()
