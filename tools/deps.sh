#!/usr/bin/env bash
# Installs the Debian 12 packages libmla needs that are not installed yet.
# Usage: tools/deps.sh [hip|clang|python|docs]   ("hip" adds clang-22 and the ROCm 5.2 files;
# "clang" adds Debian's clang-14 with libFuzzer, the sanitizers and libomp;
# "python" what the Python package's tests need; "docs" matplotlib, which
# tools/docs_gen.py draws the roofline plots with)
set -euo pipefail
pkgs=(build-essential cmake ninja-build ccache pkg-config libopenblas-openmp-dev libsleef-dev)
if [[ "${1:-}" == hip ]]; then
  # clang-tools-22: clang-offload-bundler, which every HIP compile runs (a
  # recommendation of clang-22, not a dependency)
  pkgs+=(clang-22 clang-tools-22 lld-22 llvm-22 libamdhip64-dev rocm-device-libs)
fi
if [[ "${1:-}" == clang ]]; then
  pkgs+=(clang-14 libclang-rt-14-dev libomp-14-dev)
fi
# "python": the Python package's tests (python/tests) and its pip install
if [[ "${1:-}" == python ]]; then
  pkgs+=(python3-numpy python3-pytest python3-torch python3-setuptools python3-pip python3-venv)
fi
if [[ "${1:-}" == docs ]]; then
  pkgs+=(python3-matplotlib python3-numpy)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
