#!/bin/sh
# Installs the locked OpenAI SDK (package.json, package-lock.json in SRC) into
# DST/node_modules, never into the source tree. Idempotent: when DST already
# holds an install made from the same two files it does nothing and does not
# touch the network.
# usage: npm_ci.sh SRC DST
set -eu
src="$1"
dst="$2"
stamp="$dst/.folio-installed-from"
if [ -f "$dst/node_modules/openai/package.json" ] &&
   cat "$src/package.json" "$src/package-lock.json" | cmp -s - "$stamp"; then
  echo "openai-npm: $dst already installed from this package-lock.json"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "openai-npm: npm not found (deploy/install-deps.sh installs it)" >&2
  exit 1
fi
mkdir -p "$dst"
rm -f "$stamp"
cp "$src/package.json" "$src/package-lock.json" "$dst/"
npm ci --prefix "$dst" --no-audit --no-fund --ignore-scripts
cat "$src/package.json" "$src/package-lock.json" > "$stamp"
