#!/usr/bin/env bash
# Stages what `make build` made for deploy/docker/Dockerfile.cpu's runtime stage, in
# place of its binaries stage (--build-context binaries=build/image-stage):
# build/image-stage/opt/folio holds the same tree that stage builds from source — the three binaries, the entrypoint, the models and
# runtime-packages.txt (the Debian packages of the libraries they load, found by
# runtime-packages.sh on this machine, which must be bookworm like the image).
# A tree built with CUDA links folio-worker against the CUDA libraries, which the CPU
# image has not: its folio-worker-cpu (the same rank without the CUDA backend) is
# staged as folio-worker instead. Any other library outside Debian's packages is
# refused.
#
#   deploy/docker/stage-prebuilt.sh [BUILD_DIR]     (default: build)
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
build_dir="$(cd "${1:-$repo/build}" && pwd)"
stage="$repo/build/image-stage/opt/folio"
binaries=(folio-scheduler folio-worker folio)

. /etc/os-release
if [ "${VERSION_CODENAME:-}" != bookworm ]; then
  echo "stage-prebuilt: this machine is ${PRETTY_NAME:-unknown}, the image is bookworm:" \
       "build the image from source (make image) instead" >&2
  exit 1
fi
for bin in "${binaries[@]}"; do
  [ -x "$build_dir/bin/$bin" ] || { echo "stage-prebuilt: $build_dir/bin/$bin missing: run make build" >&2; exit 1; }
done

rm -rf "$repo/build/image-stage"
mkdir -p "$stage/bin" "$stage/models"
for bin in "${binaries[@]}"; do
  from="$build_dir/bin/$bin"
  [ "$bin" = folio-worker ] && [ -x "$build_dir/bin/folio-worker-cpu" ] && from="$build_dir/bin/folio-worker-cpu"
  # Without debug sections: RelWithDebInfo binaries are several times their code.
  objcopy --strip-debug "$from" "$stage/bin/$bin"
  outside=$(ldd "$stage/bin/$bin" | awk '/=> \// && $3 !~ /^\/(usr\/)?lib/ {print $3}')
  if [ -n "$outside" ]; then
    echo "stage-prebuilt: $from loads libraries no Debian package provides:" $outside >&2
    exit 1
  fi
done
cp "$repo/deploy/docker/entrypoint.sh" "$stage/bin/entrypoint.sh"
cp -r "$repo/models/." "$stage/models/"
"$repo/deploy/docker/runtime-packages.sh" "${binaries[@]/#/$stage/bin/}" > "$stage/runtime-packages.txt"
echo "stage-prebuilt: $(du -sh "$stage" | cut -f1) in $stage," \
     "$(wc -l < "$stage/runtime-packages.txt") runtime packages"
