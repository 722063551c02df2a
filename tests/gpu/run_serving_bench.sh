#!/usr/bin/env bash
# The serving benchmark (issue 4's round trip and served-vs-offline tokens/s)
# on a bigger machine than CI's 2-core VM: the GPU machine's CPUs (the GPU is
# not used), with binaries packed by tests/gpu/prepare_cluster_carry.sh and
# carried as .gpu-carry/cluster.tar.xz. Extra arguments go to the throughput
# run (e.g. --threads 4).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$ROOT/tests/gpu/gpu_carry.sh"
unpack_cluster run_serving_bench.sh
echo "cores: $(nproc); $(grep -m1 'model name' /proc/cpuinfo || true)"
BENCH=("$B/folio_bench_serving" --bin-dir "$B" --model "$ROOT/models/folio-demo")
echo "== round trip"
timeout "${ROUNDTRIP_TIMEOUT_S:-100}" "${BENCH[@]}" --mode roundtrip --iterations 3000 --warmup 300
echo "== throughput"
timeout "${THROUGHPUT_TIMEOUT_S:-200}" "${BENCH[@]}" --mode throughput --num-prompts 64 \
  --max-tokens 128 --repeats 5 --tp 1 --tp 2:shm "$@"
