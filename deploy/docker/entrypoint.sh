#!/usr/bin/env bash
# Container entrypoint: the first argument picks the binary, the rest are its flags.
#   scheduler ARGS...  -> folio-scheduler ARGS...
#   worker ARGS...     -> folio-worker ARGS...
#   folio ARGS...      -> folio ARGS...   (run / serve / generate)
#   anything else      -> run as given (a shell, for debugging)
set -euo pipefail
cmd="${1:-}"
case "$cmd" in
  scheduler|folio-scheduler) shift; exec /opt/folio/bin/folio-scheduler "$@" ;;
  worker|folio-worker)       shift; exec /opt/folio/bin/folio-worker "$@" ;;
  folio)                     shift; exec /opt/folio/bin/folio "$@" ;;
  "") echo "usage: docker run IMAGE scheduler|worker|folio [ARGS...]" >&2; exit 2 ;;
  *) exec "$@" ;;
esac
