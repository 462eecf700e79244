#!/usr/bin/env bash
# Each arch's test wheels carry that arch's code objects and only its: `rocm-bake wheel check` passes every
# wheel for its own arch and refuses each other arch's torch.
#
# Usage: check_test_wheels.sh WHEELS ARCH...   (WHEELS/<arch>/*.whl, as make_test_wheels.py writes them)
set -euo pipefail
wheels=${1:?usage: check_test_wheels.sh WHEELS ARCH...}
shift
[ $# -ge 2 ] || { echo "check_test_wheels.sh: give at least two arches, so one can refuse the other's" >&2; exit 2; }
rocm_bake="$(cd "$(dirname "$0")/../.." && pwd)/.venv/bin/rocm-bake"
for arch in "$@"; do
  "$rocm_bake" wheel arches "$wheels/$arch"/*.whl
  "$rocm_bake" wheel check --arch "$arch" "$wheels/$arch"/*.whl
done
for arch in "$@"; do
  for other in "$@"; do
    [ "$other" = "$arch" ] && continue
    if "$rocm_bake" wheel check --arch "$other" "$wheels/$arch"/torch-*.whl 2>/dev/null; then
      echo "::error title=wheel check::a $arch torch wheel passed the $other check" >&2
      exit 1
    fi
  done
done
echo "each arch's wheels carry its code objects only: $*"
