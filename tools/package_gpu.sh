#!/usr/bin/env bash
# The package checks (docs/PACKAGE.md) on the GPU machine: an NVIDIA GPU,
# nvcc, python3 with torch (CUDA) and transformers.
#
#   bash tools/package_gpu.sh build   # build/gpu through bench/run_gpu.sh's build stage
#   bash tools/package_gpu.sh test    # the checks below; exit 1 when any failed
#
# test: ctest's stream, graph and package tests of build/gpu; python -m
# libmla info; the Python tests (python/tests, pytest) on the HIP and CPU
# backends; the Hugging Face check (prefill + 32 greedy steps, stock against
# libmla) on the HIP and CPU backends, default RoPE and YaRN. Logs: $OUT.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build/gpu}
OUT=${OUT:-$PWD/out/package}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export LIBMLA_LIBRARY=$PWD/$BUILD PYTHONPATH=$PWD/python
FAILED=""

step() {  # name, command...
  local name=$1
  shift
  echo "=== $name"
  if "$@" > "$OUT/$name.log" 2>&1; then
    tail -n "${TAIL:-6}" "$OUT/$name.log"
  else
    tail -n 40 "$OUT/$name.log"
    FAILED="$FAILED $name"
  fi
}

case "${1:-test}" in
build)
  BUILD_DIR=$BUILD OUT=$OUT bash bench/run_gpu.sh build
  ;;
test)
  step ctest ctest --test-dir "$BUILD" --output-on-failure \
    -R 'test_streams|test_attention_graph|test_indexer_graph|package_'
  step info "$PY" -m libmla info
  if "$PY" -c "import pytest" 2>/dev/null; then
    # (the transformers cases of test_hf.py are the hf_* steps below)
    TAIL=3 step pytest "$PY" -m pytest -q -p no:cacheprovider -rs python/tests \
      -k "not test_transformers_deepseek_v3"
  else
    echo "=== pytest: not installed for $PY, python/tests not run"
    FAILED="$FAILED pytest-missing"
  fi
  for b in hip cpu; do
    for r in default yarn; do
      TAIL=9 step "hf_${b}_$r" "$PY" python/examples/hf_decode_check.py --backend "$b" --rope "$r"
    done
  done
  if [[ -n $FAILED ]]; then
    echo "FAILED:$FAILED"
    exit 1
  fi
  echo "all package checks passed"
  ;;
*)
  echo "usage: bash tools/package_gpu.sh build|test" >&2
  exit 2
  ;;
esac
