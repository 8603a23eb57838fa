#!/usr/bin/env bash
# One call on the NVIDIA H200 machine for the attention bodies, on a tree
# already built (it builds nothing):
#
#   cmake -S . -B build/gpu -G Ninja -DMLA_HIP=NVIDIA -DMLA_GPU_TARGETS=90a \
#         -DMLA_WITH_SLEEF=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc
#   cmake --build build/gpu            (or: bash bench/run_gpu.sh build)
#   bash bench/run_gpu_attention.sh "$OUT"
#
# 90a (not 90) is what compiles the sm_90a wgmma body and the probe
# (build/gpu/hip/attention_wgmma_probe); BUILD_DIR overrides build/gpu.
# Steps, in order, each under a timeout; a failing step is logged and the
# next one runs. Everything goes to the directory $1 (default $OUT, else
# out/gpu_attention): <step>.log, the benches' <step>.json, steps.txt (one
# line per step: status, seconds, command), a summary printed last.
#   probe            the three wgmma products of the sm_90a body on exact integers
#                    against the host (names the layout at fault when the body fails)
#   conf_wgmma       mla conformance --backend hip --op 'attention*' --repeat (the
#                    sm_90a body where it applies; --repeat: bit-identical twice)
#   conf_mma, conf_cpasync, conf_fma
#                    the same with MLA_HIP_ATTENTION=mma / cpasync / fma
#   dec_b128_c4096   mla bench decode --backend hip, B 128, context 4096, heads 16 and
#                    128, caches bf16 / e4m3 NORMAL (fp8) / FP8_SCALED
#   dec_c32768       B 8 and 1, context 32768, heads 128, the three caches
#   sparse_b64_b128  --sparse (top-k 2048 of 32768), FP8_SCALED, heads 128, B 64 and 128
#   mma_b128_c4096, mma_c32768
#                    the two dense benches again under MLA_HIP_ATTENTION=mma (the
#                    mma.sync body), the comparison
# Time: the steps share a budget of RUN_GPU_ATTENTION_S seconds (default 230);
# a step gets min(its limit, what is left) and is skipped below 10 s.
set -u
OUT=${1:-${OUT:-$(dirname "$0")/../out/gpu_attention}}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) || exit 1
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD_DIR:-build/gpu}
MLA=$BUILD/apps/mla
PROBE=$BUILD/hip/attention_wgmma_probe
BUDGET=${RUN_GPU_ATTENTION_S:-230}
START=$(date +%s)
FAILED=""
: > "$OUT/steps.txt"
# the device matmul ceiling is cuBLAS's (bench/ceilings_device.c): PyTorch's wheel if present
if [ -z "${MLA_BENCH_BLAS:-}" ]; then
  MLA_BENCH_BLAS=$(python3 -c 'import glob, os, nvidia
print(next(iter(sorted(p for d in nvidia.__path__ for p in glob.glob(os.path.join(d, "*", "lib", "libcublas.so.*")))), ""))' 2>/dev/null)
  export MLA_BENCH_BLAS
fi

# step NAME LIMIT_S [VAR=VALUE ...] COMMAND ...: COMMAND under env and timeout,
# stdout + stderr to $OUT/NAME.log
step() {
  local name=$1 lim=$2 left t0 rc
  shift 2
  left=$((BUDGET - ($(date +%s) - START)))
  [ "$lim" -gt "$left" ] && lim=$left
  if [ "$lim" -lt 10 ]; then
    echo "skipped  0 s  $name (budget spent)" | tee -a "$OUT/steps.txt"
    FAILED="$FAILED $name(skipped)"
    return
  fi
  t0=$(date +%s)
  timeout "$lim" env "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  local st=ok
  [ $rc -eq 124 ] && st=timeout
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && st="rc=$rc"
  printf '%-8s %3d s  %s: %s\n' "$st" $(($(date +%s) - t0)) "$name" "$*" | tee -a "$OUT/steps.txt"
  [ "$st" = ok ] || FAILED="$FAILED $name"
}

{
  git rev-parse HEAD 2>/dev/null
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv 2>&1
  echo "MLA_BENCH_BLAS=$MLA_BENCH_BLAS"
} > "$OUT/machine.txt" 2>&1
if [ ! -x "$MLA" ]; then
  echo "no $MLA: build the tree first (see the top of $0)" | tee -a "$OUT/steps.txt"
  exit 1
fi

step probe 30 "$PROBE"
step conf_wgmma 60 -u MLA_HIP_ATTENTION "$MLA" conformance --backend hip --op 'attention*' \
  --require-device --repeat --verbose --json "$OUT/conf_wgmma.json"
for body in mma cpasync fma; do
  step "conf_$body" 45 MLA_HIP_ATTENTION=$body "$MLA" conformance --backend hip --op 'attention*' \
    --require-device --verbose --json "$OUT/conf_$body.json"
done
for pre in dec mma; do
  envs=(-u MLA_HIP_ATTENTION)
  [ $pre = mma ] && envs=(MLA_HIP_ATTENTION=mma)
  step "${pre}_b128_c4096" 45 "${envs[@]}" "$MLA" bench decode --backend hip --batch 128 \
    --contexts 4096 --heads 16,128 --json "$OUT/${pre}_b128_c4096.json"
  step "${pre}_c32768" 45 "${envs[@]}" "$MLA" bench decode --backend hip --batch 8,1 \
    --contexts 32768 --heads 128 --json "$OUT/${pre}_c32768.json"
  [ $pre = dec ] && step sparse_b64_b128 45 "${envs[@]}" "$MLA" bench decode --backend hip \
    --sparse --caches fp8_scaled --batch 64,128 --heads 128 --json "$OUT/sparse_b64_b128.json"
done

# the summary last (the device tool returns the end of the output)
printf '\n=== summary (%d s)\n' $(($(date +%s) - START))
[ -f "$OUT/probe.log" ] && cat "$OUT/probe.log"
for f in "$OUT"/conf_*.log; do
  [ -f "$f" ] && echo "$(basename "$f" .log): $(grep -E '^conformance:' "$f" | tail -n 1)" \
    && grep -E "FAIL" "$f" | head -5
done
for f in dec_b128_c4096 dec_c32768 sparse_b64_b128 mma_b128_c4096 mma_c32768; do
  [ -f "$OUT/$f.log" ] || continue
  printf '\n# %s\n' "$f"
  grep -E "^(ceiling|sweep)|^ *(batch|[0-9]+ +[0-9]+ +[0-9]+ )" "$OUT/$f.log" | awk '!seen[$0]++' | head -16
done
printf '\n'
cat "$OUT/steps.txt"
[ -z "$FAILED" ] && { echo "all steps ok"; exit 0; }
echo "failed:$FAILED"
exit 1
