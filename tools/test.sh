#!/usr/bin/env bash
# Builds and runs the whole test suite (CPU + reference; HIP tests skip
# without a GPU), then again under ASan + UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
jobs=$(nproc)
for preset in default asan; do
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  ctest --preset "$preset" -j "$jobs"
done
