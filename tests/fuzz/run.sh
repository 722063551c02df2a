#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz in build-fuzz/ (clang-14, ASan +
# UBSan, CUDA off, only the fuzz targets and the libraries they use) and runs
# each one: first over its regressions (tests/fuzz/regressions/<target>/*,
# every crash found so far: they must all pass), then fuzzing for a bounded
# time from a copy of its seed corpus (tests/fuzz/corpus/<target>/, which is
# never modified). Fails if any target crashes, leaks, times out or runs out
# of memory; the input that did it is kept under build-fuzz/fuzz-artifacts/.
# `make test` runs it.
#
# Environment:
#   FUZZ_SECONDS  fuzzing time per target (default 20)
#   FUZZ_JOBS     targets fuzzed at once (default 2: one per core here)
#   JOBS          build parallelism (default 2)
#   FUZZ_TARGETS  space-separated subset, e.g. "chat_template step_plan"
#   BUILD_DIR     build tree (default build-fuzz)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
FUZZ_DIR=tests/fuzz
BUILD_DIR="${BUILD_DIR:-build-fuzz}"
FUZZ_SECONDS="${FUZZ_SECONDS:-20}"
FUZZ_JOBS="${FUZZ_JOBS:-2}"
JOBS="${JOBS:-2}"
ALL_TARGETS="safetensors_header model_config generation_config tokenizer_json tokenizer_roundtrip
  step_plan generate_request openai_request chat_template"
TARGETS="${FUZZ_TARGETS:-$ALL_TARGETS}"
# Per input: a hang past -timeout seconds, or RSS past -rss_limit_mb (also the
# largest single allocation), is a finding like a crash.
LIBFUZZER_LIMITS=(-timeout=10 -rss_limit_mb=2048)
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && [ -x /usr/bin/llvm-symbolizer-14 ]; then
  export ASAN_SYMBOLIZER_PATH=/usr/bin/llvm-symbolizer-14  # file:line in reports
fi

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }
T_ALL=$(now)

for tool in clang++-14 clang-14; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "fuzz: $tool not found (deploy/install-deps.sh installs clang-14 and libclang-rt-14-dev)" >&2
    exit 1
  fi
done

echo "== fuzz: configure $BUILD_DIR"
T=$(now)
mkdir -p "$BUILD_DIR"
cmake -S . -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14 \
  -DFOLIO_FUZZ=ON -DFOLIO_ENABLE_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -gline-tables-only" \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=OFF >"$BUILD_DIR/fuzz-configure.log" 2>&1 \
  || { cat "$BUILD_DIR/fuzz-configure.log" >&2; exit 1; }
echo "fuzz: configure took $(elapsed "$T")"

echo "== fuzz: build (-j$JOBS)"
T=$(now)
build_targets=()
for t in $TARGETS; do build_targets+=("fuzz_$t"); done
cmake --build "$BUILD_DIR" -j"$JOBS" --target "${build_targets[@]}"
echo "fuzz: build took $(elapsed "$T")"

WORK="$BUILD_DIR/fuzz-work"
ARTIFACTS="$BUILD_DIR/fuzz-artifacts"
rm -rf "$WORK"
mkdir -p "$WORK" "$ARTIFACTS"

# One target: replay its regressions, then fuzz from a copy of its corpus.
# Writes $WORK/<target>.log and $WORK/<target>.rc (0 = clean).
run_target() {
  local t="$1" bin="$BUILD_DIR/bin/fuzz_$1" log="$WORK/$1.log" start
  start=$(now)
  {
    local rc=0
    local regressions=()
    if [ -d "$FUZZ_DIR/regressions/$t" ]; then
      mapfile -t regressions < <(find "$FUZZ_DIR/regressions/$t" -type f ! -name '*.md' | sort)
    fi
    rm -rf "${ARTIFACTS:?}/$t"
    mkdir -p "$ARTIFACTS/$t"
    if [ ${#regressions[@]} -gt 0 ]; then
      echo "-- $t: replaying ${#regressions[@]} regression inputs"
      "$bin" "${LIBFUZZER_LIMITS[@]}" -artifact_prefix="$ARTIFACTS/$t/" "${regressions[@]}" || rc=$?
    fi
    if [ "$rc" -eq 0 ]; then
      mkdir -p "$WORK/$t/corpus"
      cp -r "$FUZZ_DIR/corpus/$t/." "$WORK/$t/corpus/"
      local dict=()
      if [ -f "$FUZZ_DIR/dicts/$t.dict" ]; then
        case "$t" in
          chat_template) cp "$FUZZ_DIR/dicts/$t.dict" "$WORK/$t.dict" ;;
          *) cat "$FUZZ_DIR/dicts/json.dict" "$FUZZ_DIR/dicts/$t.dict" >"$WORK/$t.dict" ;;  # JSON inputs
        esac
        dict=(-dict="$WORK/$t.dict")
      fi
      echo "-- $t: fuzzing for ${FUZZ_SECONDS}s"
      "$bin" "${LIBFUZZER_LIMITS[@]}" -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 \
        "${dict[@]}" -artifact_prefix="$ARTIFACTS/$t/" "$WORK/$t/corpus" || rc=$?
    fi
    echo "$rc" >"$WORK/$t.rc"
    echo "-- $t: rc $rc, $(elapsed "$start")"
  } >"$log" 2>&1
}

echo "== fuzz: run (${FUZZ_SECONDS}s per target, $FUZZ_JOBS at a time)"
T=$(now)
running=0
for t in $TARGETS; do
  run_target "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$FUZZ_JOBS" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true

failed=()
for t in $TARGETS; do
  rc=$(cat "$WORK/$t.rc" 2>/dev/null || echo missing)
  stats=$(grep -E '^stat::number_of_executed_units' "$WORK/$t.log" | awk '{print $2}' || true)
  cov=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$WORK/$t.log" | sed -E 's/.*cov: ([0-9]+).*/\1/' || true)
  took=$(tail -n 1 "$WORK/$t.log" | sed -E 's/.*, //')
  printf 'fuzz: %-20s %s  runs %-8s cov %-6s %s\n' "$t" "$([ "$rc" = 0 ] && echo ok || echo FAILED)" \
    "${stats:--}" "${cov:--}" "$took"
  if [ "$rc" != 0 ]; then failed+=("$t"); fi
done
echo "fuzz: run took $(elapsed "$T")"

if [ ${#failed[@]} -gt 0 ]; then
  for t in "${failed[@]}"; do
    echo "===== $t ($WORK/$t.log, last 60 lines) =====" >&2
    tail -n 60 "$WORK/$t.log" >&2
    echo "Inputs kept: $(ls "$ARTIFACTS/$t" 2>/dev/null | sed "s|^|$ARTIFACTS/$t/|" | tr '\n' ' ')" >&2
    echo "Reproduce: $BUILD_DIR/bin/fuzz_$t INPUT; once fixed, commit INPUT as $FUZZ_DIR/regressions/$t/<name>." >&2
  done
  echo "fuzz: FAILED: ${failed[*]} (total $(elapsed "$T_ALL"))" >&2
  exit 1
fi
echo "fuzz: all ${TARGETS//[$'\n']/ } clean (total $(elapsed "$T_ALL"))" | tr -s ' '
