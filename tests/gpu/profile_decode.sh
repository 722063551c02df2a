#!/usr/bin/env bash
# Nsight Compute profiles of the decode kernels as attention_bandwidth_gpu_check
# runs them (batch 64, context 1k, head_dim 128, bf16, shuffled blocks): the
# tensor-core decode on GQA 32/8 with one CTA per item and with persistent
# CTAs, and the CUDA-core decode on MHA 32/32 for contrast. Full sections
# (--set full), one launch each, as text in $PROFILE_DIR (default
# build-gpu/profiles). Needs ncu (Nsight Compute) and a GPU; builds the one
# target in kernels-only mode like run.sh.
#
# Launch numbers: the bench runs each (case, kernel) pair 46 times (3 + 20
# queued, 3 + 20 idle); cases in order MHA 1k, GQA 1k, ...; kernels in order
# simt, mma, mma-persist, auto (auto is simt for MHA, mma for GQA).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-gpu}"
OUT_DIR="${PROFILE_DIR:-$BUILD_DIR/profiles}"
ARCH="${FOLIO_CUDA_ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d ' .')}"
GENERATOR=()
if command -v ninja >/dev/null 2>&1; then GENERATOR=(-G Ninja); fi
cmake -S "$ROOT" -B "$BUILD_DIR" "${GENERATOR[@]}" -DFOLIO_KERNELS_ONLY=ON \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$ARCH" >/dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target attention_bandwidth_gpu_check
NCU="${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}"
mkdir -p "$OUT_DIR"
profile() {  # name, kernel regex, launches to skip
  echo "== $1"
  timeout 240 "$NCU" --clock-control none --set full -k "regex:$2" --launch-skip "$3" \
    --launch-count 1 "$BUILD_DIR/bin/attention_bandwidth_gpu_check" >"$OUT_DIR/$1.txt" 2>&1 ||
    echo "profile_decode.sh: ncu failed for $1 (see $OUT_DIR/$1.txt)"
  grep -E "Duration|DRAM Throughput|SM Active Cycles|Elapsed Cycles|Issue Slots Busy|Eligible Warps|Achieved Occupancy|One or More Eligible|Waves Per SM" \
    "$OUT_DIR/$1.txt" | head -20 || true
}
profile gqa1k_mma MmaDecodeKernel 100
profile gqa1k_mma_persist MmaDecodeKernel 150
profile mha1k_simt SimtDecode 10
