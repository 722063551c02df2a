# Sourced by the tests/gpu scripts: what they share about .gpu-carry/, the
# folder of pieces (headers, packed binaries) that travels to GPU machines
# beside the checkout. The caller sets ROOT to the checkout.

# Keeps .gpu-carry/ out of git in this checkout.
exclude_gpu_carry() {
  local exclude="$ROOT/.git/info/exclude"
  if [[ -d "$ROOT/.git" ]] && ! grep -qx '/.gpu-carry/' "$exclude" 2>/dev/null; then
    echo '/.gpu-carry/' >>"$exclude"
  fi
}

# Unpacks .gpu-carry/cluster.tar.xz (tests/gpu/prepare_cluster_carry.sh) into
# a temporary folder, CLUSTER_DIR, removed on exit; sets B to its bin/ and
# puts its lib/, then the machine's CUDA libraries, on LD_LIBRARY_PATH.
# $1: the calling script's name, for the error when the archive is missing.
unpack_cluster() {
  local archive="$ROOT/.gpu-carry/cluster.tar.xz"
  if [[ ! -f "$archive" ]]; then
    echo "$1: $archive missing (tests/gpu/prepare_cluster_carry.sh)" >&2
    exit 1
  fi
  CLUSTER_DIR="$(mktemp -d)"
  trap 'rm -rf "$CLUSTER_DIR"' EXIT
  tar -C "$CLUSTER_DIR" -xJf "$archive"
  export LD_LIBRARY_PATH="$CLUSTER_DIR/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
  B="$CLUSTER_DIR/bin"
}
