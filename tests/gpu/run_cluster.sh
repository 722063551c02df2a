#!/usr/bin/env bash
# The full build on a GPU machine: runs what tests/gpu/run.sh cannot build
# there (anything that needs gRPC), from binaries packed on a CI machine by
# tests/gpu/prepare_cluster_carry.sh and carried as .gpu-carry/cluster.tar.xz.
#   1. cuda_worker_test: CudaWorker against CpuWorker on the demo model.
#   2. folio serve --device cuda --dtype float32, then folio generate (greedy)
#      must stream the same text as folio run (the CPU offline engine).
#   3. The same with the default bf16 on CUDA: the text and whether it
#      matches are printed, not gated (bf16 rounding may change a token).
#   4. With 2+ GPUs: step 2 at --tp 2 (NCCL all-reduce between the devices).
#   5. Each model tests/gpu/prepare_carry.sh wrote to .gpu-carry/models
#      (sliding windows) and .gpu-carry/cluster-models (yarn / linear RoPE
#      scaling past the unscaled context): step 2 against folio run on it.
# Every fp32 serve also scores the prompt (prompt_logprobs, the LM-head rows
# of RowLogits gathered over the ranks) against folio run's scores.
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
          --max-tokens "$TOKENS" --ignore-eos)" || failed+=("folio run")
echo "folio run (CPU): $want"

# Prompt scores: folio run's (CPU) JSON and the served cluster's, compared,
# on a prompt long enough for several 64-row LM-head calls.
SCORE_PROMPT="$(printf 'In the beginning God created the heaven and the earth. %.0s' {1..14})"
scores_of_run() {  # model dir -> file
  local out="$CLUSTER_DIR/scores.run.$RANDOM.json"
  timeout 120 "$B/folio" run --model "$1" --prompt "$SCORE_PROMPT" --temperature 0 --max-tokens 1 \
    --prompt-logprobs 2 --json >"$out" || return 1
  printf '%s' "$out"
}
SERVED_SCORES="$CLUSTER_DIR/scores.served.json"
compare_scores() {  # run file, served file, tolerance
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
run = json.loads(open(sys.argv[1]).readline())["prompt_logprobs"][1:]
served = []  # the first chunks' (several for a long prompt)
for line in open(sys.argv[2]):
    served += json.loads(line).get("chunk", {}).get("prompt_logprobs", [])
tol = float(sys.argv[3])
worst = max((abs(a["logprob"] - b.get("logprob", 0.0)) for a, b in zip(run, served)), default=0.0)
same_ids = [a["token_id"] for a in run] == [b.get("token_id", 0) for b in served]
print(f"prompt scores: {len(served)} of {len(run)} tokens, ids {'equal' if same_ids else 'DIFFER'}, "
      f"max |d logprob| {worst:.2e} (tolerance {tol})")
sys.exit(0 if same_ids and len(run) == len(served) and worst <= tol else 1)
PY
}
want_scores="$(scores_of_run "$MODEL")" || failed+=("folio run --prompt-logprobs")

# Serves the demo model on cuda with extra scheduler flags; prints the
# greedy text folio generate streamed.
# MODEL_DIR (default the demo model) picks the model.
serve_and_generate() {
  local log="$CLUSTER_DIR/serve.$RANDOM.log"
  rm -f "$SERVED_SCORES"  # a serve that fails early must not leave the last one's
  "$B/folio" serve --model "${MODEL_DIR:-$MODEL}" --device "$DEVICE" --port 50551 --worker-base-port 50561 \
    --metrics-port 0 "$@" >"$log" 2>&1 &
  local serve=$!
  local text rc=0
  text="$(timeout 180 "$B/folio" generate --address 127.0.0.1:50551 --wait-s 90 \
            --temperature 0 --max-tokens "$TOKENS" --ignore-eos "$PROMPT" 2>"$log.client")" ||
    rc=$?
  if [[ $rc -eq 0 ]]; then
    timeout 120 "$B/folio" generate --address 127.0.0.1:50551 --temperature 0 --max-tokens 1 \
      --prompt-logprobs 2 --json "$SCORE_PROMPT" >"$SERVED_SCORES" 2>>"$log.client" || rc=$?
  fi
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
compare_scores "$want_scores" "$SERVED_SCORES" 1e-3 || failed+=("fp32 prompt scores differ")

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

gpus=0
if [[ "$DEVICE" == cuda ]]; then gpus="$(nvidia-smi -L | grep -c '^GPU')"; fi
if [[ "$gpus" -ge 2 ]]; then
  echo "== folio serve --device cuda --dtype float32 --tp 2 ($gpus GPUs: NCCL)"
  got_tp="$(serve_and_generate --dtype float32 --tp 2)" || failed+=("serve fp32 tp2")
  echo "served (cuda fp32, tp 2): $got_tp"
  if [[ "$got_tp" != "$want" ]]; then failed+=("tp 2 text differs from folio run"); fi
  compare_scores "$want_scores" "$SERVED_SCORES" 1e-3 || failed+=("tp 2 prompt scores differ")
else
  echo "== one GPU: no tensor-parallel (NCCL) run"
fi

for dir in "$ROOT"/.gpu-carry/models/*/ "$ROOT"/.gpu-carry/cluster-models/*/; do
  [[ -f "$dir/config.json" ]] || continue
  name="$(basename "$dir")"
  echo "== $name: folio serve --device $DEVICE --dtype float32 against folio run"
  want_w="$(timeout 120 "$B/folio" run --model "$dir" --prompt "$PROMPT" --temperature 0 \
              --max-tokens "$TOKENS" --ignore-eos)" || failed+=("folio run $name")
  got_w="$(MODEL_DIR="$dir" serve_and_generate --dtype float32)" ||
    failed+=("serve $name")
  echo "folio run: $want_w"
  echo "served:    $got_w"
  if [[ "$got_w" != "$want_w" ]]; then failed+=("$name text differs from folio run"); fi
  want_scores_w="$(scores_of_run "$dir")" || failed+=("folio run --prompt-logprobs $name")
  compare_scores "$want_scores_w" "$SERVED_SCORES" 1e-3 || failed+=("$name prompt scores differ")
done

if [[ ${#failed[@]} -gt 0 ]]; then
  printf 'FAILED: %s\n' "${failed[@]}"
  exit 1
fi
echo "== run_cluster.sh: all passed"
