# folio — top-level entry points. `make run` and `make test` are the two that
# matter; each sets up dependencies and builds first.
#
#   make test        set-up + build + every test (ctest) + the fuzzers (tests/fuzz/run.sh,
#                    a clang build in build-fuzz) + the sanitizer builds and their tests
#                    (tests/sanitizers/run.sh: build-asan, build-tsan); CI runs this (.ci/run)
#   make run         set-up + build + a local cluster: folio serve $(SERVE_ARGS)
#                    (e.g. SERVE_ARGS="--tp 2")
#   make bench       set-up + build + the scheduler and kernel benchmarks
#   make build       set-up + configure + build only
#   make image       the CPU image from source (deploy/docker/Dockerfile.cpu) with podman,
#                    on Debian base images made here (no registry needed); IMAGE=folio:cpu
#   make clean       remove the build tree
#
# Variables: JOBS (parallel jobs, default 2), BUILD_DIR (default build),
# BUILD_TYPE (default RelWithDebInfo), CMAKE_ARGS (extra configure arguments).

JOBS       ?= 2
BUILD_DIR  ?= build
BUILD_TYPE ?= RelWithDebInfo
CMAKE_ARGS ?=

# deploy/install-deps.sh must run as root: use sudo only when we are not root.
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: all deps configure build test run bench image clean

all: build

deps:
	$(SUDO) bash deploy/install-deps.sh

# Re-running configure is cheap and picks up CMakeLists.txt changes.
configure: deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD_DIR) -j$(JOBS)

test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure --no-tests=error -j$(JOBS)
	JOBS=$(JOBS) bash tests/fuzz/run.sh
	JOBS=$(JOBS) bash tests/sanitizers/run.sh

# A whole local cluster (folio-scheduler + folio-worker) serving the demo
# model on 127.0.0.1:50051 (gRPC) and http://127.0.0.1:8000/v1 (OpenAI HTTP);
# `build/bin/folio generate "prompt"` or curl in another terminal streams
# from it. TP=2 with `make run SERVE_ARGS="--tp 2"`.
SERVE_ARGS ?=
run: build
	$(BUILD_DIR)/bin/folio serve $(SERVE_ARGS)

bench: build
	$(BUILD_DIR)/bin/folio_bench_scheduler
	$(BUILD_DIR)/bin/folio_bench_kernels --benchmark_repetitions=10 --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
	$(BUILD_DIR)/bin/folio_bench_gemm

# Built from source inside the image's build stage (about as long as `make build`);
# tests/deploy/container_test.py packages this tree's binaries into the same runtime
# stage instead. With docker (and a registry): docker build -f deploy/docker/Dockerfile.cpu .
IMAGE ?= folio:cpu
image: deps
	$(SUDO) bash deploy/docker/make-base-images.sh
	$(SUDO) deploy/docker/podman.sh build --pull=never --network=host \
	  -f deploy/docker/Dockerfile.cpu --ignorefile deploy/docker/Dockerfile.cpu.dockerignore \
	  -t $(IMAGE) .

clean:
	rm -rf $(BUILD_DIR)
