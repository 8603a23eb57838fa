#!/usr/bin/env bash
# Builds the fuzz preset (clang-14, libFuzzer + ASan + UBSan) and runs each
# target of fuzz/ on a copy of its seed corpus (docs/ROBUSTNESS.md).
# Usage: tools/fuzz.sh smoke | SECONDS_PER_TARGET [JOBS]
#   tools/fuzz.sh smoke      the CI run: a fixed seed and a fixed number of
#                            runs per target (~10 s each), the same every time
#   tools/fuzz.sh 3600 2     an hour per target on 2 workers, random seeds
# Crashes are written to build/fuzz/crashes/<target>/; turn each into a
# regression input under fuzz/regressions/<target>/ (see the docs).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-smoke}
jobs=${2:-1}
declare -A smoke_runs=([npy]=100000 [safetensors]=5000 [tensor_ops]=1000)
bash tools/deps.sh clang
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)"
status=0
for t in npy safetensors tensor_ops; do
  work=build/fuzz/corpus-run/$t
  crashes=build/fuzz/crashes/$t
  [[ $secs == smoke ]] && rm -rf "$work" # the same start every time
  mkdir -p "$work" "$crashes"
  cp -n fuzz/corpus/$t/* "$work"/ 2>/dev/null || true
  extra=(-max_len=$([[ $t == safetensors ]] && echo 65536 || echo 4096))
  [[ -f fuzz/$t.dict ]] && extra+=(-dict=fuzz/$t.dict)
  ((jobs > 1)) && extra+=(-jobs="$jobs" -workers="$jobs")
  if [[ $secs == smoke ]]; then
    extra+=(-seed=1 -runs="${smoke_runs[$t]}")
  else
    extra+=(-max_total_time="$secs")
  fi
  echo "fuzz_$t: $secs"
  if ! build/fuzz/fuzz/fuzz_$t "$work" fuzz/corpus/$t "${extra[@]}" -timeout=20 \
      -rss_limit_mb=4096 -artifact_prefix="$crashes/" -print_final_stats=1 \
      >build/fuzz/$t.log 2>&1; then
    echo "fuzz_$t FAILED (build/fuzz/$t.log, inputs in $crashes):"
    grep -E "ERROR|SUMMARY|fuzz_tensor_ops:|Test unit written" build/fuzz/$t.log | head -20 || true
    status=1
  else
    grep -E "stat::number_of_executed_units|cov:" build/fuzz/$t.log | tail -2 || true
  fi
done
exit $status
