#!/usr/bin/env bash
# Builds the kernels-only tree for the local GPU and runs every GPU check.
# For GPU machines whose images lack our Debian packages: needs only CUDA,
# CMake and a C++ compiler (Ninja when present).
#
#   tests/gpu/run.sh            # build into build-gpu/, run all checks
#   BUILD_DIR=/tmp/b FOLIO_CUDA_ARCH=90 JOBS=8 tests/gpu/run.sh
#
# demo_model_gpu_check reads JSON with nlohmann-json (header only). GPU
# images lack it: run tests/gpu/prepare_carry.sh on a machine that has it
# (copies the headers into .gpu-carry/, which git ignores locally), carry
# .gpu-carry to the GPU machine, and this script picks it up.
#
# The CUDA arch comes from FOLIO_CUDA_ARCH, else nvidia-smi's compute_cap,
# else CMake's "native" (which fails to configure without a GPU: set
# FOLIO_CUDA_ARCH to build-test on a GPU-less machine).
#
# Exit: 0 all passed; 1 a build step or a check failed; 77 every check was
# skipped (no CUDA device visible).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-gpu}"

# Compile only for this machine's GPU: faster, and what we run is what we test.
ARCH="${FOLIO_CUDA_ARCH:-}"
if [[ -z "$ARCH" ]] && command -v nvidia-smi >/dev/null 2>&1; then
  ARCH="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
          head -n1 | tr -d ' .')" || ARCH=""
fi
ARCH="${ARCH:-native}"

if [[ -z "${FOLIO_NLOHMANN_INCLUDE_DIR:-}" && -f "$ROOT/.gpu-carry/include/nlohmann/json.hpp" ]]; then
  export FOLIO_NLOHMANN_INCLUDE_DIR="$ROOT/.gpu-carry/include"
fi

# GPU images often carry NCCL only as the nvidia-nccl pip wheel (libnccl.so.2,
# no unversioned link): point cmake/FolioNccl.cmake at it when nothing else is set.
if [[ -z "${NCCL_ROOT:-}" && ! -f /usr/local/cuda/include/nccl.h ]]; then
  for py in python3 /usr/bin/python3; do
    dir="$("$py" -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])' 2>/dev/null)" || dir=""
    if [[ -n "$dir" && -f "$dir/include/nccl.h" ]]; then export NCCL_ROOT="$dir"; break; fi
  done
fi
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv || true
fi
command -v nvcc >/dev/null 2>&1 && nvcc --version | tail -n2

GENERATOR=()
if command -v ninja >/dev/null 2>&1; then GENERATOR=(-G Ninja); fi

echo "== configure (CUDA arch $ARCH) in $BUILD_DIR"
cmake -S "$ROOT" -B "$BUILD_DIR" "${GENERATOR[@]}" \
  -DFOLIO_KERNELS_ONLY=ON -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="$ARCH"
echo "== build"
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}"

shopt -s nullglob
checks=("$BUILD_DIR"/bin/*_gpu_check)
if [[ ${#checks[@]} -eq 0 ]]; then
  echo "run.sh: no GPU checks were built (is nvcc visible to CMake?)" >&2
  exit 1
fi
# The demo model check is part of the gate: missing means a missing header.
if [[ ! -x "$BUILD_DIR/bin/demo_model_gpu_check" ]]; then
  echo "run.sh: demo_model_gpu_check was not built (nlohmann/json.hpp not found: run tests/gpu/prepare_carry.sh and carry .gpu-carry)" >&2
  missing_demo=1
fi
# nccl_group_gpu_check needs NCCL at configure time (cmake/FolioNccl.cmake).
if [[ ! -x "$BUILD_DIR/bin/nccl_group_gpu_check" ]]; then
  echo "run.sh: NCCL was not found (nccl.h, libnccl; set NCCL_ROOT): nccl_group_gpu_check not built" >&2
fi

passed=() failed=() skipped=()
for check in "${checks[@]}"; do
  name="$(basename "$check")"
  echo "== $name"
  rc=0
  # A hung kernel must not eat the whole GPU lease.
  timeout "${CHECK_TIMEOUT_S:-150}" "$check" || rc=$?
  case $rc in
    0) passed+=("$name") ;;
    77) skipped+=("$name") ;;
    124) failed+=("$name (timed out after ${CHECK_TIMEOUT_S:-150} s)") ;;
    *) failed+=("$name (exit $rc)") ;;
  esac
done

# The sliding-window models tests/gpu/prepare_carry.sh wrote, each against its
# torch reference.
for dir in "$ROOT"/.gpu-carry/models/*/; do
  [[ -f "$dir/reference.json" && -x "$BUILD_DIR/bin/demo_model_gpu_check" ]] || continue
  name="demo_model_gpu_check[$(basename "$dir")]"
  echo "== $name"
  rc=0
  timeout "${CHECK_TIMEOUT_S:-150}" "$BUILD_DIR/bin/demo_model_gpu_check" "$dir" || rc=$?
  case $rc in
    0) passed+=("$name") ;;
    77) skipped+=("$name") ;;
    *) failed+=("$name (exit $rc)") ;;
  esac
done

echo "== summary: ${#passed[@]} passed, ${#failed[@]} failed, ${#skipped[@]} skipped"
for f in "${failed[@]}"; do echo "FAILED: $f"; done
for s in "${skipped[@]}"; do echo "SKIPPED: $s"; done
if [[ -n "${missing_demo:-}" ]]; then echo "FAILED: demo_model_gpu_check (not built)"; exit 1; fi
if [[ ${#failed[@]} -gt 0 ]]; then exit 1; fi
if [[ ${#passed[@]} -eq 0 ]]; then exit 77; fi
exit 0
