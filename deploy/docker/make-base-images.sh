#!/usr/bin/env bash
# Makes the Debian base images the Dockerfiles start FROM (debian:bookworm and
# debian:bookworm-slim) from Debian's own archive, for a machine that reaches no
# container registry: mmdebstrap writes a minbase root file system, `podman import`
# tags it under the name a registry pull would give. An image already present is
# kept (pass --force to make it again).
#
# Written by hand because nothing packaged does it: Debian ships the tools
# (mmdebstrap, podman) but no base image. The apt sources are those of the official
# images (bookworm, bookworm-updates, bookworm-security), so `apt-get install` in a
# build resolves the same package versions as deploy/install-deps.sh on the host.
# Both tags name one image, made as Debian's -slim is (no documentation, man pages
# or locales; the exclusions stay in /etc/dpkg/dpkg.cfg.d for later installs): the
# build stage needs nothing the full image adds, and one debootstrap takes half the
# time of two.
#
#   sudo deploy/docker/make-base-images.sh [--force]
set -euo pipefail

force=0
[ "${1:-}" = "--force" ] && force=1
MIRROR=${FOLIO_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY=${FOLIO_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}
PODMAN=("$(dirname "$0")/podman.sh")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

sources=(
  "deb $MIRROR bookworm main"
  "deb $MIRROR bookworm-updates main"
  "deb $SECURITY bookworm-security main"
)
slim_excludes=(
  --dpkgopt='path-exclude=/usr/share/man/*'
  --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/locale/*'
)

SLIM=docker.io/library/debian:bookworm-slim
FULL=docker.io/library/debian:bookworm
if [ $force -eq 0 ] && "${PODMAN[@]}" image exists "$SLIM" && "${PODMAN[@]}" image exists "$FULL"; then
  echo "make-base-images: $FULL and $SLIM present"
  exit 0
fi
start=$SECONDS
# merged-usr hook: /usr merged by mmdebstrap itself, so the usrmerge package (and the
# 46 MB of perl it needs) stays out, as in Debian's own images.
if ! mmdebstrap --quiet --variant=minbase --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    "${slim_excludes[@]}" bookworm "$work/rootfs.tar" "${sources[@]}" > "$work/mmdebstrap.log" 2>&1; then
  cat "$work/mmdebstrap.log" >&2
  echo "make-base-images: mmdebstrap failed" >&2
  exit 1
fi
# The official images' configuration: a PATH (an imported image has none, and Kubernetes-
# style runs such as `podman kube play` do not add one) and bash as the command.
"${PODMAN[@]}" import --quiet \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["bash"]' "$work/rootfs.tar" "$SLIM" >/dev/null
"${PODMAN[@]}" tag "$SLIM" "$FULL"
echo "make-base-images: $FULL and $SLIM made in $((SECONDS - start)) s"
