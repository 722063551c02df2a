#!/usr/bin/env bash
# Prints the Debian/Ubuntu packages that provide the shared libraries the given
# binaries load (ldd + dpkg -S), one per line. The Docker builds run it in the
# build stage, after deploy/install-deps.sh, so the runtime stage installs exactly
# the runtime halves of what install-deps.sh installed, with no list to keep in sync.
#
#   deploy/docker/runtime-packages.sh build/bin/folio-scheduler build/bin/folio-worker
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }
libs=$(for bin in "$@"; do ldd "$bin" | awk '/=> \//{print $3}'; done | sort -u)
[ -n "$libs" ] || exit 0
# usrmerge: the loader may report /lib/... while dpkg recorded /usr/lib/... (or the
# reverse), and a symlink's target may be what dpkg knows. One dpkg -S call for all
# candidate paths (it is slow per call); the ones dpkg does not know are ignored.
candidates=$(for lib in $libs; do
  printf '%s\n' "$lib" "$(readlink -f "$lib")" "/usr$lib" "${lib#/usr}"
done | sort -u)
# shellcheck disable=SC2086
{ dpkg -S $candidates 2>/dev/null || true; } | sed -n 's/^\([^:, ]*\)[:,].*/\1/p' | sort -u
