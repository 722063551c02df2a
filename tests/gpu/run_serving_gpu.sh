#!/usr/bin/env bash
# The whole GPU serving step, measured in one call on a GPU machine (made to fit
# in 6 minutes on an H200, so that a rerun fits in a 15-minute window):
#   1. writes a random Llama-3-8B-shaped model (32 layers, hidden 4096,
#      intermediate 14336, GQA 32/8, head_dim 128, vocab 128256, bf16) with
#      tools/make_random_model.py --device cuda: generated there, never
#      downloaded or carried;
#   2. measures the device-copy bandwidth (1 GiB device to device; reads +
#      writes, as tests/gpu/attention_gpu_bench.cu counts it);
#   3. for each KV cache dtype (auto = the model's bf16, then fp8) and, when
#      the build has CUDA graphs (folio serve --enforce-eager exists), with and
#      without them: folio serve --device cuda, then folio bench on
#      ShareGPT-like lengths at concurrency 1, 16, 64 and 256: output tokens/s,
#      mean / p99 TTFT, mean TPOT;
#   4. the decode step at batch 1, 64 and 256 (the median gap between tokens
#      while C streams of 128 random prompt tokens decode 256 tokens together)
#      against its byte roofline: (weight bytes + the KV bytes a step reads) /
#      the copy bandwidth of step 2;
#   5. the prefix cache's host tier: a multi-turn chat workload
#      (tools/make_multiturn_dataset.py, each turn re-sends its history) whose
#      histories outgrow a device pool of ~1500 tokens but fit the host pool,
#      with --no-host-prefix-cache and with the tier: mean / p99 TTFT.
# A configuration the build cannot serve (it refuses the flag or never becomes
# ready) is reported as not run and skipped; a failed benchmark fails the script.
# Binaries: .gpu-carry/cluster.tar.xz (tests/gpu/prepare_cluster_carry.sh),
# or BIN_DIR. DEVICE=cpu SHAPE=tiny runs the same steps on the CPU with a small
# model: ctest run_serving_gpu_script checks the script that way.
# Results: a table on stdout and, with OUT set, $OUT/serving_gpu.json.
# Exit: 0 ran, 1 a step failed, 77 no GPU.
set -uo pipefail
DEVICE="${DEVICE:-cuda}"
SHAPE="${SHAPE:-8b}"
PYTHON="${PYTHON:-python3}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [[ -n "${BIN_DIR:-}" ]]; then
  B="$BIN_DIR"
  CLUSTER_DIR="$(mktemp -d)"
  trap 'rm -rf "$CLUSTER_DIR"' EXIT
else
  source "$ROOT/tests/gpu/gpu_carry.sh"
  unpack_cluster run_serving_gpu.sh
fi
if [[ "$DEVICE" == cuda ]] && ! nvidia-smi -L >/dev/null 2>&1; then
  echo "run_serving_gpu.sh: no NVIDIA GPU visible: skipped"
  exit 77
fi
START=$SECONDS
elapsed() { echo "[$((SECONDS - START)) s] $*"; }

case "$SHAPE" in
  8b)
    SHAPE_FLAGS=(--hidden-size 4096 --layers 32 --heads 32 --kv-heads 8 --head-dim 128
                 --intermediate-size 14336 --vocab-size 128256 --max-position-embeddings 4096)
    CONCURRENCY="${CONCURRENCY:-1 16 64 256}"
    ROOFLINE_BATCHES="${ROOFLINE_BATCHES:-1 64 256}"
    MAX_MODEL_LEN=4096
    TIER_FLAGS=(--kv-cache-mb 192 --swap-space-mb 4096 --max-model-len 1024)  # 128 KiB a token (bf16)
    ;;
  tiny)
    SHAPE_FLAGS=(--hidden-size 256 --layers 2 --heads 8 --kv-heads 2 --head-dim 32
                 --intermediate-size 512 --vocab-size 4096 --max-position-embeddings 2048)
    CONCURRENCY="${CONCURRENCY:-1 4}"
    ROOFLINE_BATCHES="${ROOFLINE_BATCHES:-1 4}"
    MAX_MODEL_LEN=2048
    TIER_FLAGS=(--kv-cache-mb 2 --swap-space-mb 64 --max-model-len 1024)  # 1 KiB a token (fp32, CPU)
    ;;
  *) echo "run_serving_gpu.sh: SHAPE is 8b or tiny, not $SHAPE" >&2; exit 1 ;;
esac
BENCH_TIMEOUT_S="${BENCH_TIMEOUT_S:-150}"
READY_TIMEOUT_S="${READY_TIMEOUT_S:-240}"
MODEL="${MODEL_DIR:-$CLUSTER_DIR/model}"
RESULTS="$CLUSTER_DIR/results.jsonl"
: >"$RESULTS"
failed=()

elapsed "== writing the $SHAPE model to $MODEL (tensors drawn on $DEVICE)"
"$PYTHON" "$ROOT/tools/make_random_model.py" --out "$MODEL" "${SHAPE_FLAGS[@]}" --dtype bf16 \
  --device "$DEVICE" --threads "$(nproc)" || { echo "run_serving_gpu.sh: model generation failed"; exit 1; }

elapsed "== device-copy bandwidth"
COPY_GBPS="$("$PYTHON" - "$DEVICE" <<'PY'
import sys, time, torch
dev = sys.argv[1]
n = 1 << 30 if dev == "cuda" else 1 << 28
src = torch.ones(n, dtype=torch.uint8, device=dev)
dst = torch.empty_like(src)
sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
times = []
for _ in range(12):
    sync(); t = time.perf_counter(); dst.copy_(src); sync(); times.append(time.perf_counter() - t)
times.sort()
print(f"{2 * n / times[len(times) // 2] / 1e9:.1f}")  # reads + writes, median of 12
PY
)" || { echo "run_serving_gpu.sh: copy bandwidth failed"; exit 1; }
echo "copy bandwidth: $COPY_GBPS GB/s (reads + writes)"

free_port() {
  "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PORT="$(free_port)"
WORKER_PORT="$(free_port)"
SERVE_PID=""
stop_serve() {
  if [[ -n "$SERVE_PID" ]]; then
    kill -INT "$SERVE_PID" 2>/dev/null
    wait "$SERVE_PID" 2>/dev/null
    SERVE_PID=""
  fi
}
trap 'stop_serve; rm -rf "$CLUSTER_DIR"' EXIT

# Starts folio serve for configuration $1 with the flags after it and waits
# until it answers; 1 when it exits or never answers (the flags are not served
# by this build: reported, recorded in $RESULTS as not run, and skipped). Sets
# SERVED_KV to the cache dtype the scheduler reports.
serve() {
  local config="$1"
  shift
  SERVE_LOG="$CLUSTER_DIR/serve.$RANDOM.log"
  "$B/folio" serve --model "$MODEL" --device "$DEVICE" --port "$PORT" --http-port 0 \
    --worker-base-port "$WORKER_PORT" --metrics-port 0 --max-model-len "$MAX_MODEL_LEN" "$@" \
    >"$SERVE_LOG" 2>&1 &
  SERVE_PID=$!
  local waited=0
  until timeout 60 "$B/folio" generate --address "127.0.0.1:$PORT" --wait-s 5 --max-tokens 1 \
          --temperature 0 "Hello" >/dev/null 2>&1; do
    waited=$((waited + 5))
    if ! kill -0 "$SERVE_PID" 2>/dev/null || ((waited >= READY_TIMEOUT_S)); then
      echo "   not served by this build; the log ends:"
      tail -n 3 "$SERVE_LOG" | sed 's/^/     /'
      echo "{\"config\": \"$config\", \"not_run\": true}" >>"$RESULTS"
      stop_serve
      return 1
    fi
    sleep 5
  done
  grep -m2 -E "KV|blocks" "$SERVE_LOG" | sed 's/^/   /'
  SERVED_KV="$(grep -m1 -o -E 'KV blocks of [0-9]+ tokens in [a-z0-9_]+' "$SERVE_LOG" | awk '{print $NF}')"
}

# folio bench with the given flags; appends {config, kind, concurrency,
# summary} to $RESULTS.
bench() {
  local config="$1" kind="$2" c="$3"
  shift 3
  local out="$CLUSTER_DIR/bench.$RANDOM.json"
  if ! timeout "$BENCH_TIMEOUT_S" "$B/folio" bench --address "127.0.0.1:$PORT" --seed 1 \
         --max-concurrency "$c" --json "$out" "$@" >"$out.log" 2>&1; then
    echo "   folio bench $* at concurrency $c failed:"
    tail -n 5 "$out.log" | sed 's/^/   /'
    failed+=("$config $kind c=$c")
    return
  fi
  "$PYTHON" - "$config" "$kind" "$c" "$out" "${SERVED_KV:-}" >>"$RESULTS" <<'PY'
import json, sys
s = json.load(open(sys.argv[4]))
s.pop("requests", None)
print(json.dumps({"config": sys.argv[1], "kind": sys.argv[2], "concurrency": int(sys.argv[3]),
                  "kv_cache_dtype": sys.argv[5], "summary": s}))
PY
}

GRAPH_MODES=("eager")
if "$B/folio" serve --help 2>&1 | grep -q -- "--enforce-eager"; then GRAPH_MODES=("graphs" "eager"); fi
for kv in ${KV_DTYPES:-auto fp8}; do
  for mode in "${GRAPH_MODES[@]}"; do
    config="kv=$kv $mode"
    flags=(--kv-cache-dtype "$kv")
    if [[ "$mode" == eager && "${#GRAPH_MODES[@]}" -gt 1 ]]; then flags+=(--enforce-eager); fi
    elapsed "== $config: folio serve ${flags[*]}"
    serve "$config" "${flags[@]}" || continue
    for c in $CONCURRENCY; do
      prompts=$((c == 1 ? 4 : 2 * c))
      bench "$config" sharegpt "$c" --dataset sharegpt --num-prompts "$prompts"
    done
    for c in $ROOFLINE_BATCHES; do
      bench "$config" decode "$c" --dataset random --input-len 128 --output-len 256 --num-prompts "$c"
    done
    stop_serve
    elapsed "   done"
  done
done

if [[ "${HOST_TIER:-1}" == 1 ]]; then
  "$PYTHON" "$ROOT/tools/make_multiturn_dataset.py" --out "$CLUSTER_DIR/multiturn.jsonl" >/dev/null
  for tier in off on; do
    flags=("${TIER_FLAGS[@]}")
    if [[ "$tier" == off ]]; then flags+=(--no-host-prefix-cache); fi
    elapsed "== host tier $tier: folio serve ${flags[*]}"
    serve "host tier $tier" "${flags[@]}" || continue
    bench "host tier $tier" multiturn 1 --dataset "$CLUSTER_DIR/multiturn.jsonl" --num-prompts 32
    stop_serve
  done
fi

elapsed "== results"
"$PYTHON" - "$MODEL/config.json" "$COPY_GBPS" "$RESULTS" "${OUT:-}" <<'PY' || failed+=("results")
import json, os, sys
cfg = json.load(open(sys.argv[1]))
copy_gbps = float(sys.argv[2])
rows = [json.loads(l) for l in open(sys.argv[3]) if l.strip()]
h, layers, vocab = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
d = cfg.get("head_dim") or h // cfg["num_attention_heads"]
nq, nkv, inter = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d, cfg["intermediate_size"]
per_layer = h * (nq + 2 * nkv) + nq * h + 3 * h * inter + 2 * h
params = vocab * h * (1 if cfg.get("tie_word_embeddings") else 2) + layers * per_layer + h
print(f"model: {params / 1e6:,.1f}M parameters; copy bandwidth {copy_gbps:.0f} GB/s")
print("\n| config | concurrency | output tok/s | mean TTFT ms | p99 TTFT ms | mean TPOT ms |")
print("|---|---|---|---|---|---|")
for r in rows:
    if r.get("not_run"):
        print(f"| {r['config']} | not run: this build does not serve it | | | | |")
    elif r["kind"] == "sharegpt":
        s = r["summary"]
        print(f"| {r['config']} | {r['concurrency']} | {s['output_throughput']:.0f} | "
              f"{s['ttft_ms']['mean']:.1f} | {s['ttft_ms']['p99']:.1f} | {s['tpot_ms']['mean']:.2f} |")
tier = {r["config"]: r["summary"] for r in rows if r.get("kind") == "multiturn"}
if tier:
    print("\n| multi-turn, 1 stream | mean TTFT ms | p99 TTFT ms | output tok/s |")
    print("|---|---|---|---|")
    for name, s in tier.items():
        print(f"| {name} | {s['ttft_ms']['mean']:.1f} | {s['ttft_ms']['p99']:.1f} | "
              f"{s['output_throughput']:.1f} |")
    off, on = tier.get("host tier off"), tier.get("host tier on")
    if off and on and on["ttft_ms"]["mean"] > 0:
        print(f"| off / on | {off['ttft_ms']['mean'] / on['ttft_ms']['mean']:.2f}x lower with the tier | | |")
print("\n| config | decode batch | step ms (median ITL) | roofline ms | x roofline | target |")
print("|---|---|---|---|---|---|")
report = {"copy_gbps": copy_gbps, "parameters": params, "runs": rows, "roofline": []}
for r in rows:
    if r.get("not_run") or r["kind"] != "decode":
        continue
    c = r["concurrency"]
    kv_bytes = {"float32": 4, "bfloat16": 2, "float16": 2, "int8": 1,
                "fp8_e4m3": 1}.get(r.get("kv_cache_dtype"))
    if kv_bytes is None:
        print(f"| {r['config']} | {c} | KV dtype {r.get('kv_cache_dtype')!r} unknown: no roofline | | | |")
        continue
    # Every weight but the embedding table (C rows of it), bf16; the KV of C
    # sequences at the decode phase's mean context, 128 + 256 / 2, in the
    # dtype the scheduler reported (fp8 / int8 scales: 0.2%, left out).
    weight_bytes = 2 * (params - vocab * h + c * h)
    kv_read = c * (128 + 128) * layers * 2 * nkv * kv_bytes
    roof_ms = (weight_bytes + kv_read) / (copy_gbps * 1e9) * 1e3
    step_ms = r["summary"]["itl_ms"]["median"]
    ratio = step_ms / roof_ms if roof_ms > 0 else float("nan")
    target = {1: 1.5, 64: 1.25}.get(c)
    verdict = "" if target is None else f"<= {target}x: {'met' if ratio <= target else 'missed'}"
    print(f"| {r['config']} | {c} | {step_ms:.2f} | {roof_ms:.2f} | {ratio:.2f} | {verdict} |")
    report["roofline"].append({"config": r["config"], "batch": c, "step_ms": step_ms,
                               "roofline_ms": roof_ms, "ratio": ratio})
if not report["roofline"]:
    sys.exit("run_serving_gpu.sh: no configuration was served")
if sys.argv[4]:
    os.makedirs(sys.argv[4], exist_ok=True)
    with open(os.path.join(sys.argv[4], "serving_gpu.json"), "w") as f:
        json.dump(report, f, indent=1)
PY
elapsed "total"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "run_serving_gpu.sh: FAILED: ${failed[*]}"
  exit 1
fi
echo "run_serving_gpu.sh: ran"
