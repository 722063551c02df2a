#!/usr/bin/env bash
# Sanitizer builds and their tests (for make test, after its ctest).
#
#   tests/sanitizers/run.sh            both: ASan + UBSan, then TSan
#   tests/sanitizers/run.sh asan       AddressSanitizer + UndefinedBehaviorSanitizer
#   tests/sanitizers/run.sh tsan       ThreadSanitizer
#
# Each sanitizer gets a build tree of its own next to build/ (build-asan/,
# build-tsan/; FOLIO_SANITIZE in cmake/FolioSanitize.cmake, CUDA off), builds
# only the test binaries listed below and runs them under ctest. Any finding
# fails its test: ASan halts on the first error and LSan reports leaks at
# exit, UBSan aborts (-fno-sanitize-recover=all), TSan halts on the first
# race. At the end it prints the wall and CPU seconds of every phase.
#
# Environment: JOBS (parallel build and test jobs, default 2), CTEST_ARGS
# (extra ctest arguments, e.g. "-R Engine").
#
# What runs where:
#   asan: every *_test.cc of tests/scheduler, tests/common, tests/kernels,
#         tests/worker and tests/server (the CPU kernels, the scheduler, the
#         common library, the worker and the in-process engine and service),
#         less ASAN_SKIP_TARGETS and ASAN_SKIP_TESTS.
#   tsan: the threaded ones (TSAN_TARGETS): the engine and the Generation
#         service, the remote worker group, the communicators (shared memory,
#         Gloo, in-process tensor parallelism) and the rendezvous store they
#         meet through, and the folio.v1.Worker service.
# Skips carry their reasons beside them. A test that is skipped here still
# runs in the normal build (make test's ctest).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
JOBS="${JOBS:-2}"
CTEST_ARGS="${CTEST_ARGS:-}"

ASAN_DIRS=(scheduler common kernels worker server)
# Test binaries of ASAN_DIRS that the ASan build leaves out, with reasons.
declare -A ASAN_SKIP_TARGETS=(
  # CUDA code: sanitizer builds have no CUDA (cmake/FolioSanitize.cmake);
  # these run in the normal build and on GPU machines (tests/gpu).
  [cuda_attention_host_test]="CUDA host code; no CUDA in sanitizer builds"
  [cuda_worker_test]="CUDA worker; no CUDA in sanitizer builds"
  # Not in-process: a real Prometheus server scraping folio-scheduler and
  # folio-worker processes (an integration test).
  [metrics_prometheus_test]="multi-process integration test with a Prometheus server"
)
# Single tests (ctest names) the ASan build skips, with reasons.
ASAN_SKIP_TESTS=(
  # Asserts that 10^10 loop steps stop within 10 s of wall time; the Jinja
  # interpreter with ASan + UBSan is several times slower (21 s measured at
  # -Og, 29 s at -O1 on a loaded machine). The step limit itself is also
  # checked by the other JinjaLimitsTest cases.
  'JinjaLimitsTest\.HugeLoopsStop'
  # Asserts that the deepest nesting the renderer allows fits in a 1 MiB
  # thread stack: ASan's stack redzones and UBSan's checks make every frame
  # several times larger, so the budget only holds for the normal build.
  'JinjaLimitsTest\.NestingFitsInOneMegabyteOfStack'
  # A Python oracle test (jinja2 renders the same cases); the renderer it
  # drives is covered by the jinja_*_test binaries and chat_template_test here.
  'chat_template_conformance'
)

TSAN_DIRS=(server worker)
TSAN_TARGETS=(
  engine_test                # the engine loop, in-process CPU worker
  generation_service_test    # folio.v1.Generation on a real gRPC server
  remote_worker_group_test   # the scheduler's side of the worker group
  shm_communicator_test      # shared-memory collectives, threads as ranks
  gloo_communicator_test     # Gloo collectives, threads as ranks
  tensor_parallel_test       # LocalCommunicator, one thread per rank
  rendezvous_service_test    # the store ranks meet through
  worker_service_test        # folio.v1.Worker, in-process and folio-worker
  worker_service_again_test  # folio.v1.Worker's Initialize again, in-process ranks
)
# Single tests (ctest names) the TSan build skips, with reasons (none yet).
TSAN_SKIP_TESTS=()

# --- timing ---------------------------------------------------------------
declare -a SUMMARY=()
PHASE_START=0
CPU_START=0
# CPU seconds (user + sys) of all finished children of this shell: `times`
# must run in this shell (in a $(...) subshell it sees only its own
# children), so it writes to a file that awk then reads.
TIMES_FILE="$(mktemp)"
cpu_now() {
  times > "$TIMES_FILE"
  # Second line: the children's "XmY.YYYs XmY.YYYs" (user, sys).
  CPU_NOW=$(awk 'NR == 2 { s = 0
    for (i = 1; i <= NF; i++) { split($i, p, "m"); sub("s", "", p[2]); s += p[1] * 60 + p[2] }
    printf "%.1f", s }' "$TIMES_FILE")
}
phase_begin() { PHASE_START=$(date +%s.%N); cpu_now; CPU_START=$CPU_NOW; echo "=== $1"; }
phase_end() {
  local wall cpu
  cpu_now
  wall=$(awk -v a="$PHASE_START" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
  cpu=$(awk -v a="$CPU_START" -v b="$CPU_NOW" 'BEGIN { printf "%.0f", b - a }')
  SUMMARY+=("$(printf '%-6s %-10s %6ss wall %6ss cpu' "$1" "$2" "$wall" "$cpu")")
}
print_summary() {
  local rc=$?
  if ((${#SUMMARY[@]})); then
    echo "=== sanitizer phases (cpu = user + sys of the phase's processes; load: $(cut -d' ' -f1-3 /proc/loadavg))"
    printf '%s\n' "${SUMMARY[@]}"
    cpu_now
    printf '%-17s %6ss wall %6.0fs cpu\n' "total" "$SECONDS" "$CPU_NOW"
  fi
  rm -f "$TIMES_FILE"
  exit "$rc"
}
trap print_summary EXIT

# --- one sanitizer --------------------------------------------------------
# run_one NAME SANITIZE CXX_FLAGS TESTS_OPT TARGETS EXCLUDE_REGEX DIRS... -- EXTRA_CMAKE_ARGS...
# CXX_FLAGS: the libraries' flags; TESTS_OPT: the optimisation level of the
# test files (FOLIO_TESTS_OPT, tests/CMakeLists.txt).
run_one() {
  local name=$1 sanitize=$2 flags=$3 tests_opt=$4 targets=$5 exclude=$6
  shift 6
  local dirs=()
  while (($#)) && [[ $1 != -- ]]; do dirs+=("$1"); shift; done
  (($#)) && shift
  local bdir="$ROOT/build-$name"

  phase_begin "$name: configure ($bdir)"
  mkdir -p "$bdir"
  cmake -S "$ROOT" -B "$bdir" -G Ninja -DFOLIO_SANITIZE="$sanitize" \
    -DFOLIO_ENABLE_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_FLAGS_DEBUG="$flags" -DFOLIO_TESTS_OPT="$tests_opt" "$@" \
    > "$bdir/configure.log" 2>&1 ||
    { cat "$bdir/configure.log"; return 1; }
  phase_end "$name" configure

  phase_begin "$name: build ($targets)"
  # shellcheck disable=SC2086
  cmake --build "$bdir" -j"$JOBS" -- $targets
  phase_end "$name" build

  # One ctest over the chosen test directories, so that -j spans all of them.
  local agg="$bdir/sanitizer-tests"
  mkdir -p "$agg"
  : > "$agg/CTestTestfile.cmake"
  local d
  for d in "${dirs[@]}"; do echo "subdirs(\"$bdir/tests/$d\")" >> "$agg/CTestTestfile.cmake"; done
  phase_begin "$name: test"
  local rc=0
  # shellcheck disable=SC2086
  ctest --test-dir "$agg" -j"$JOBS" --timeout 300 --output-on-failure --no-tests=error \
    -E "$exclude" $CTEST_ARGS || rc=$?
  phase_end "$name" test
  return "$rc"
}

# Test binaries (target names = *_test.cc names) of tests/DIR.
test_targets_of() { local f; for f in "$ROOT"/tests/"$1"/*_test.cc; do basename "$f" .cc; done; }

# "^(a|b|c)$" from the arguments; "^$" (matches no test name) when empty.
anchored_alternation() {
  if (($#)); then local IFS='|'; echo "^($*)\$"; else echo '^$'; fi
}

run_asan() {
  local targets=() skipped=() d t
  for d in "${ASAN_DIRS[@]}"; do
    for t in $(test_targets_of "$d"); do
      if [[ -n ${ASAN_SKIP_TARGETS[$t]+x} ]]; then
        echo "asan: skipping $t (${ASAN_SKIP_TARGETS[$t]})"
        skipped+=("${t}_NOT_BUILT")
      else
        targets+=("$t")
      fi
    done
  done
  # kvsim_refuses_max_model_len_beyond_the_pool (tests/scheduler) runs it.
  targets+=(folio-kvsim)
  # Sanitizer runtime options: stop at the first error, leaks fail the test.
  export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1:strict_string_checks=1:detect_odr_violation=2"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:report_error_type=1"
  # Libraries at -Og, test files at -O0. With ASan + UBSan, -O1 doubles the
  # compile time of a file (scheduler_test.cc: 33 s at -O1, 17 s at -Og, 13 s
  # at -O0; a library file costs the same at -Og as at -O0), while the tests
  # spend their time in the libraries: -O0 everywhere made the test phase
  # 2-3x longer (the Jinja limits, the KV property and scheduler scenario
  # tests). -g1: line tables for the reports, without full debug info.
  run_one asan address,undefined "-Og -g1" -O0 "${targets[*]}" \
    "$(anchored_alternation "${skipped[@]}" "${ASAN_SKIP_TESTS[@]}")" "${ASAN_DIRS[@]}"
}

run_tsan() {
  local skipped=() d t
  # Everything else in TSAN_DIRS is not built: an ASan + UBSan target.
  for d in "${TSAN_DIRS[@]}"; do
    for t in $(test_targets_of "$d"); do
      [[ " ${TSAN_TARGETS[*]} " == *" $t "* ]] || skipped+=("${t}_NOT_BUILT")
    done
  done
  # ignore_noninstrumented_modules=1: no reports from the interceptors
  # (memcpy, free, epoll, ...) when they are called from inside libraries not
  # built with TSan (gRPC, abseil, Gloo, libstdc++): their own lock-free
  # hand-offs are invisible, so every such report would be a false one, and
  # races inside them are theirs. Every access made by folio's code (and by
  # the gRPC / abseil templates compiled into it) is still checked. absl's
  # locks and gRPC's hand-over of a call's batches are annotated by
  # tests/sanitizers/tsan_annotations.cc; tsan.supp says why each of its
  # entries is gRPC's and not ours.
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1:suppressions=$ROOT/tests/sanitizers/tsan.supp"
  # Without OpenMP (the CPU kernels' documented single-thread fallback):
  # libgomp is not built with TSan, so its barriers and its thread pool's
  # hand-offs are invisible to TSan and every parallel region would report
  # races that are not there. The races TSan is here for are between our
  # threads (engine loop, gRPC callbacks, communicator ranks).
  # Libraries at -O1 (TSan's usual level; with TSan it compiles about as
  # fast as -O0), test files at -O0 (20% faster to compile).
  run_one tsan thread "-O1 -g1" -O0 "${TSAN_TARGETS[*]}" \
    "$(anchored_alternation "${skipped[@]}" "${TSAN_SKIP_TESTS[@]}")" "${TSAN_DIRS[@]}" \
    -- -DCMAKE_DISABLE_FIND_PACKAGE_OpenMP=ON
}

# --- main -----------------------------------------------------------------
which=("$@")
((${#which[@]})) || which=(asan tsan)
for w in "${which[@]}"; do
  case "$w" in
    asan) run_asan ;;
    tsan) run_tsan ;;
    *) echo "usage: $0 [asan] [tsan]" >&2; exit 2 ;;
  esac
done
