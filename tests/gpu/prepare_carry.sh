#!/usr/bin/env bash
# Copies the header-only pieces the kernels-only build needs beyond CUDA and
# the C++ standard library (nlohmann-json, for demo_model_gpu_check) into
# .gpu-carry/include, and keeps that folder out of git (.git/info/exclude).
# Run it where the Debian package nlohmann-json3-dev is installed, then send
# .gpu-carry along to the GPU machine (the device tool's `carry`); run.sh
# finds it there.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$ROOT/tests/gpu/gpu_carry.sh"
SRC="${NLOHMANN_SRC:-/usr/include/nlohmann}"
if [[ ! -f "$SRC/json.hpp" ]]; then
  echo "prepare_carry.sh: $SRC/json.hpp not found (apt-get install nlohmann-json3-dev)" >&2
  exit 1
fi
mkdir -p "$ROOT/.gpu-carry/include"
rm -rf "$ROOT/.gpu-carry/include/nlohmann"
cp -r "$SRC" "$ROOT/.gpu-carry/include/nlohmann"
exclude_gpu_carry
du -sh "$ROOT/.gpu-carry"
