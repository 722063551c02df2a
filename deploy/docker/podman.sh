#!/usr/bin/env bash
# podman with the settings a container host without systemd, inside an unprivileged
# sandbox, needs — the CI VM is one. They go in a containers.conf of our own
# (CONTAINERS_CONF), so that `podman build`, `run` and `kube play` all take them:
# - cgroupfs: there is no systemd to manage cgroups;
# - runc: the runtime Debian's podman comes with when recommends are left out;
# - default ulimits within this shell's hard limits: podman's own default (nofile
#   2^20) cannot be set there, and neither can an nproc near the limit.
# Written by hand because no packaged tool picks these per machine.
#
#   deploy/docker/podman.sh build ...     (any podman command line)
set -euo pipefail

conf=${FOLIO_CONTAINERS_CONF:-${TMPDIR:-/tmp}/folio-containers-$(id -u).conf}
nofile=$(ulimit -Hn)
if [ "$nofile" = unlimited ] || [ "$nofile" -gt 65536 ]; then
  nofile=65536
fi
tmp=$(mktemp "$conf.XXXXXX")
cat > "$tmp" <<CONF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=4096:4096"]
[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
CONF
mv "$tmp" "$conf"
CONTAINERS_CONF=$conf exec podman "$@"
