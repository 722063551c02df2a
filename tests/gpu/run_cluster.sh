#!/usr/bin/env bash
# The full build on a GPU machine: runs what tests/gpu/run.sh cannot build
# there (anything that needs gRPC), from binaries packed on a CI machine by
# tests/gpu/prepare_cluster_carry.sh and carried as .gpu-carry/cluster.tar.xz.
#   1. cuda_worker_test: CudaWorker against CpuWorker on the demo model.
#   2. folio serve --device cuda --dtype float32, then folio generate (greedy)
#      must stream the same text as folio run (the CPU offline engine).
#   3. The same with the default bf16 on CUDA: the text and whether it
#      matches are printed, not gated (bf16 rounding may change a token).
# DEVICE=cpu runs the same script without a GPU (to check the script itself).
# Exit: 0 passed, 1 failed, 77 no GPU.
set -uo pipefail
DEVICE="${DEVICE:-cuda}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$ROOT/tests/gpu/gpu_carry.sh"
MODEL="$ROOT/models/folio-demo"
unpack_cluster run_cluster.sh
if [[ "$DEVICE" == cuda ]] && ! nvidia-smi -L >/dev/null 2>&1; then
  echo "run_cluster.sh: no NVIDIA GPU visible: skipped"
  exit 77
fi
failed=()

echo "== cuda_worker_test"
timeout 300 "$B/cuda_worker_test" || failed+=(cuda_worker_test)

PROMPT="Once upon a time"
TOKENS=48
want="$(timeout 120 "$B/folio" run --model "$MODEL" --prompt "$PROMPT" --temperature 0 \
          --max-tokens "$TOKENS")" || failed+=("folio run")
echo "folio run (CPU): $want"

# Serves the demo model on cuda with extra scheduler flags; prints the
# greedy text folio generate streamed.
serve_and_generate() {
  local log="$CLUSTER_DIR/serve.$RANDOM.log"
  "$B/folio" serve --model "$MODEL" --device "$DEVICE" --port 50551 --worker-base-port 50561 \
    --metrics-port 0 "$@" >"$log" 2>&1 &
  local serve=$!
  local text rc=0
  text="$(timeout 180 "$B/folio" generate --address 127.0.0.1:50551 --wait-s 90 \
            --temperature 0 --max-tokens "$TOKENS" "$PROMPT" 2>"$log.client")" || rc=$?
  kill -INT "$serve" 2>/dev/null
  wait "$serve" 2>/dev/null
  if [[ $rc -ne 0 ]]; then
    echo "folio generate failed ($rc); server log:" >&2
    tail -n 30 "$log" "$log.client" >&2
    return 1
  fi
  grep -E "KV|blocks|profile" "$log" | head -n 5 >&2
  printf '%s' "$text"
}

echo "== folio serve --device $DEVICE --dtype float32"
got="$(serve_and_generate --dtype float32)" || failed+=("serve fp32")
echo "served ($DEVICE fp32): $got"
if [[ "$got" != "$want" ]]; then failed+=("fp32 text differs from folio run"); fi

if [[ "$DEVICE" == cuda ]]; then  # the CPU worker computes in float32 only
  echo "== folio serve --device cuda --dtype bfloat16"
  got16="$(serve_and_generate --dtype bfloat16)" || failed+=("serve bf16")
  echo "served (cuda bf16): $got16"
  if [[ "$got16" == "$want" ]]; then
    echo "bf16: same text as folio run"
  else
    echo "bf16: text differs (reported, not gated)"
  fi
fi

if [[ ${#failed[@]} -gt 0 ]]; then
  printf 'FAILED: %s\n' "${failed[@]}"
  exit 1
fi
echo "== run_cluster.sh: all passed"
