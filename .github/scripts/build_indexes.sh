#!/usr/bin/env bash
# Build each arch's pip index from its test wheels into one dist, as the stacks do from fetched wheels.
#
# Usage: build_indexes.sh WHEELS DIST ARCH...   (WHEELS/<arch>/*.whl, as make_test_wheels.py writes them)
set -euo pipefail
wheels=${1:?usage: build_indexes.sh WHEELS DIST ARCH...}
dist=${2:?usage: build_indexes.sh WHEELS DIST ARCH...}
shift 2
rocm_bake="$(cd "$(dirname "$0")/../.." && pwd)/.venv/bin/rocm-bake"
for arch in "$@"; do
  "$rocm_bake" index build --arch "$arch" --wheels "$wheels/$arch" --out "$dist"
done
