#!/usr/bin/env bash
# Packs the full build's binaries for tests/gpu/run_cluster.sh: GPU images lack
# our Debian packages (gRPC, protobuf, abseil, OpenBLAS, ...), so the binaries
# built here travel with the shared libraries they load, except glibc,
# libstdc++ and libgcc_s (the GPU image's are as new or newer; this machine's
# glibc must not be newer than the GPU image's) and CUDA/cuBLAS/NCCL (the GPU
# machine's own, matching its driver). Stripped and xz-compressed into
# .gpu-carry/cluster.tar.xz (~15 MB; git ignores .gpu-carry), which the device
# tool's `carry` sends along.
#
#   tests/gpu/prepare_cluster_carry.sh [BUILD_DIR (build)]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$ROOT/tests/gpu/gpu_carry.sh"
BUILD_DIR="${1:-$ROOT/build}"
BINARIES=(folio folio-scheduler folio-worker cuda_worker_test folio_bench_serving)
STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/bin" "$STAGE/lib"
for b in "${BINARIES[@]}"; do
  if [[ ! -x "$BUILD_DIR/bin/$b" ]]; then
    echo "prepare_cluster_carry.sh: $BUILD_DIR/bin/$b missing (build with CUDA first: make build)" >&2
    exit 1
  fi
  strip -o "$STAGE/bin/$b" "$BUILD_DIR/bin/$b"
done
for b in "${BINARIES[@]}"; do ldd "$BUILD_DIR/bin/$b"; done |
  awk '/=>/ && $3 ~ /^\// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so' |
  while read -r lib; do cp -L "$lib" "$STAGE/lib/"; done
mkdir -p "$ROOT/.gpu-carry"
tar -C "$STAGE" -cJf "$ROOT/.gpu-carry/cluster.tar.xz" bin lib
exclude_gpu_carry
ls -la "$ROOT/.gpu-carry/cluster.tar.xz"
