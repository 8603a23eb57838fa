#!/usr/bin/env bash
# Quick start: install what is missing, build, run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
cmake --preset default >/dev/null
cmake --build --preset default
./build/default/apps/mla info
./build/default/apps/mla demo
