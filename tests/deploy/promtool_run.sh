#!/usr/bin/env bash
# Runs promtool with the given arguments; exits 77 (ctest SKIP_RETURN_CODE) when
# promtool is missing (it comes with the Debian `prometheus` package that
# deploy/install-deps.sh installs).
if ! command -v promtool >/dev/null 2>&1; then
  echo "SKIP: promtool not found (apt-get install prometheus, or deploy/install-deps.sh)"
  exit 77
fi
exec promtool "$@"
