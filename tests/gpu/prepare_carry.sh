#!/usr/bin/env bash
# Copies the header-only pieces the kernels-only build needs beyond CUDA and
# the C++ standard library (nlohmann-json, for demo_model_gpu_check) into
# .gpu-carry/include, writes the sliding-window test models (random weights,
# torch references: tools/make_random_model.py) into .gpu-carry/models and
# two with context-stretching RoPE scaling into .gpu-carry/cluster-models
# (run_cluster.sh serves those), and keeps that folder out of git
# (.git/info/exclude).
# Run it where the Debian packages nlohmann-json3-dev and python3-torch are
# installed, then send .gpu-carry along to the GPU machine (the device tool's
# `carry`); run.sh finds it there and runs demo_model_gpu_check on each model.
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

# Windowed models the CUDA kernels must reproduce: head_dim 64, GQA 2, windows
# that start mid-block (the check uses 16-token blocks), prompts and outputs
# that outgrow them. f32 weights: the check's fp32 pass must match exactly.
PY="${FOLIO_TORCH_PYTHON:-/usr/bin/python3}"
MODELS="$ROOT/.gpu-carry/models"
CLUSTER_MODELS="$ROOT/.gpu-carry/cluster-models"
rm -rf "$MODELS" "$CLUSTER_MODELS"
if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "prepare_carry.sh: warning: $PY has no torch (python3-torch): no windowed models" >&2
  du -sh "$ROOT/.gpu-carry"
  exit 0
fi
mkdir -p "$MODELS"
common=(--hidden-size 256 --heads 4 --kv-heads 2 --layers 2 --dtype f32 --std 0.08
        --reference 4 --reference-tokens 24)
"$PY" "$ROOT/tools/make_random_model.py" --out "$MODELS/mistral_window" --mistral \
  --sliding-window 7 --prompt-len 5,12,20,40 --seed 11 "${common[@]}" >/dev/null
"$PY" "$ROOT/tools/make_random_model.py" --out "$MODELS/qwen2_window" --qwen2 \
  --sliding-window 19 --max-window-layers 1 --prompt-len 3,18,30,50 --seed 12 \
  "${common[@]}" >/dev/null

# RoPE scaling that stretches the context, for run_cluster.sh only (the
# kernels-only loader of demo_model_gpu_check reads llama3 scaling alone): the
# CUDA serve against folio run on prompts past the unscaled 96 positions.
mkdir -p "$CLUSTER_MODELS"
stretch=(--hidden-size 256 --heads 4 --kv-heads 2 --layers 2 --dtype f32 --std 0.08
         --max-position-embeddings 96 --rope-factor 4 --tie)
"$PY" "$ROOT/tools/make_random_model.py" --out "$CLUSTER_MODELS/qwen2_yarn" --qwen2 \
  --rope-type yarn --rope-original-max 96 --rope-theta 1000000 --seed 13 "${stretch[@]}" \
  >/dev/null
"$PY" "$ROOT/tools/make_random_model.py" --out "$CLUSTER_MODELS/llama_linear_v5" \
  --config-layout v5 --rope-type linear --rope-theta 500000 --seed 14 "${stretch[@]}" >/dev/null
du -sh "$ROOT/.gpu-carry"
