#!/bin/sh
# Builds llama.cpp's llama-server and llama-bench, for the side-by-side
# figures in docs/performance.md. Debian does not package llama.cpp and
# GitHub is out of reach here, but npm's node-llama-cpp ships llama.cpp's
# source as a git bundle (package/llama/gitRelease.bundle): this unpacks that
# and builds it the way llama.cpp's README says (CPU, native ISA, OpenMP).
#
#   tools/build_llama_cpp.sh [DIR]     (default /tmp/llama.cpp)
#
# Leaves DIR/build/bin/{llama-server,llama-bench} and DIR/src/gguf-py (the
# GGUF writer tools/export_gguf.py uses). NODE_LLAMA_CPP_VERSION picks the
# package version (default 3.22.1, llama.cpp of 2026-09-28).
set -eu
version="${NODE_LLAMA_CPP_VERSION:-3.22.1}"
dir="${1:-/tmp/llama.cpp}"
mkdir -p "$dir"
cd "$dir"
if [ ! -d src ]; then
  [ -f "node-llama-cpp-$version.tgz" ] || npm pack --silent "node-llama-cpp@$version" >/dev/null
  tar xzf "node-llama-cpp-$version.tgz" package/llama/gitRelease.bundle
  git clone --quiet package/llama/gitRelease.bundle src
  rm -rf package
fi
cmake -S src -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_OPENMP=ON \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF >/dev/null
cmake --build build -j "${JOBS:-2}" --target llama-server llama-bench
echo "llama.cpp $(git -C src log -1 --format=%cs): $dir/build/bin/llama-server, $dir/build/bin/llama-bench"
echo "gguf-py: $dir/src/gguf-py"
