#!/usr/bin/env bash
# One call on the NVIDIA H200 machine for the attention bodies: build the HIP
# backend for sm_90a, check the wgmma layouts, run the attention conformance
# with each body forced, the attention tests, and time decode with the
# sm_90a body and with the mma.sync body on the shapes of issue 21.
#
#   bash bench/run_gpu_attention.sh [STAGE ...]   (default: all, in order)
#
# Stages (logs in $OUT, a summary printed last):
#   build        cmake -G Ninja into $BUILD_DIR (default build/gpu; kept between calls on
#                a warm machine), -DMLA_HIP=NVIDIA -DMLA_GPU_TARGETS=90a -DMLA_WITH_SLEEF=OFF;
#                ptxas resource usage of hip/attention.hip -> ptxas_attention.txt, its
#                SASS instruction counts (HGMMA, HMMA, spills) -> sass_attention.txt
#   probe        hip/attention_wgmma_probe.cu: the three wgmma products of the sm_90a body
#                on exact integers against the host -> probe.log (names the layout at
#                fault when the body fails)
#   conformance  mla conformance --backend hip --op attention with MLA_HIP_ATTENTION
#                unset (the sm_90a body where it applies), =mma, =cpasync and =fma
#                -> conformance_attention_<path>.log (37 cases each)
#   ctest        the attention and layer tests on the GPU (ctest -R 'attention|layer_hip')
#                -> ctest_attention.log
#   bench        mla bench decode --backend hip, bf16 / e4m3 NORMAL / FP8_SCALED caches,
#                on 128 x 4096 x 16, 128 x 4096 x 128, 8 x 32768 x 128, 1 x 32768 x 128
#                (batch x context x heads), the sm_90a body then MLA_HIP_ATTENTION=mma
#                -> bench_decode_{wgmma,mma}_*.{log,json}
# Time limits keep one call near 8 minutes: build 300 s, probe 60 s,
# conformance 60 s per path, ctest 120 s, bench 45 s per run (override with
# RUN_GPU_<STAGE>_S).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/gpu_attention}
mkdir -p "$OUT"
BUILD=${BUILD_DIR:-build/gpu}
MLA=$BUILD/apps/mla
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
STAGES=${*:-build probe conformance ctest bench}
FAILED=""

note() { printf '\n=== %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }
limit() { local v="RUN_GPU_$(echo "$1" | tr a-z A-Z)_S"; echo "${!v:-$2}"; }

stage_build() {
  {
    git rev-parse HEAD 2>/dev/null
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
  } > "$OUT/machine.txt" 2>&1
  timeout "$(limit build 300)" cmake -S . -B "$BUILD" -G Ninja -DMLA_HIP=NVIDIA -DMLA_GPU_TARGETS=90a \
    -DMLA_WITH_SLEEF=OFF -DCMAKE_CUDA_COMPILER="$NVCC" > "$OUT/configure.log" 2>&1 \
    || { tail -30 "$OUT/configure.log"; return 1; }
  # the resource report beside the build (CPU only)
  ( "$NVCC" -std=c++17 -DMLA_STATIC_DEFINE -Iinclude -I. -O3 -DNDEBUG \
      -gencode=arch=compute_90a,code=sm_90a --fmad=false -ftz=false -prec-div=true -prec-sqrt=true \
      -x cu -cubin -Xptxas -v hip/attention.hip -o "$OUT/attention.cubin" > "$OUT/ptxas_attention.txt" 2>&1
    if command -v cuobjdump > /dev/null || [ -x "$(dirname "$NVCC")/cuobjdump" ]; then
      cuo=$(command -v cuobjdump || echo "$(dirname "$NVCC")/cuobjdump")
      "$cuo" -sass "$OUT/attention.cubin" > "$OUT/attention.sass" 2>&1
      awk '/Function :/ {f=$3} /HGMMA/ {h[f]++} /HMMA/ {m[f]++} /STL|LDL/ {s[f]++}
           END {for (k in h) print "HGMMA", h[k], k; for (k in m) print "HMMA", m[k], k;
                for (k in s) print "LDL/STL", s[k], k}' "$OUT/attention.sass" | sort > "$OUT/sass_attention.txt"
    fi ) &
  local isa=$!
  timeout "$(limit build 300)" cmake --build "$BUILD" -j "$(nproc)" > "$OUT/build.log" 2>&1 \
    || { grep -E "error|Error" "$OUT/build.log" | head -40; tail -20 "$OUT/build.log"; wait $isa; return 1; }
  wait $isa
  tail -1 "$OUT/build.log"
  grep -A2 "attention_wg_kernel" "$OUT/ptxas_attention.txt" | grep -E "registers|spill" | head -6
  [ -f "$OUT/sass_attention.txt" ] && grep attention_wg_kernel "$OUT/sass_attention.txt"
  return 0
}

stage_probe() {
  timeout "$(limit probe 60)" "$NVCC" -std=c++17 -DMLA_STATIC_DEFINE -Iinclude -I. \
    -gencode=arch=compute_90a,code=sm_90a hip/attention_wgmma_probe.cu -o "$BUILD/attention_wgmma_probe" \
    > "$OUT/probe_build.log" 2>&1 || { tail -20 "$OUT/probe_build.log"; return 1; }
  timeout "$(limit probe 60)" "$BUILD/attention_wgmma_probe" > "$OUT/probe.log" 2>&1
  local rc=$?
  cat "$OUT/probe.log"
  return $rc
}

stage_conformance() {
  local rc=0 path
  for path in wgmma mma cpasync fma; do
    MLA_HIP_ATTENTION=$path timeout "$(limit conformance 60)" "$MLA" conformance --backend hip \
      --op attention --require-device --verbose > "$OUT/conformance_attention_$path.log" 2>&1 || rc=1
    echo "$path: $(tail -n 1 "$OUT/conformance_attention_$path.log")"
    grep -E "^(FAIL|fail)" "$OUT/conformance_attention_$path.log" | head -10
  done
  return $rc
}

stage_ctest() {
  timeout "$(limit ctest 120)" ctest --test-dir "$BUILD" -R 'attention|layer_hip' --output-on-failure \
    > "$OUT/ctest_attention.log" 2>&1
  local rc=$?
  grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/ctest_attention.log" | tail -12
  return $rc
}

stage_bench() {
  local rc=0 body shape b c h env
  for body in wgmma mma; do
    for shape in "128 4096 16,128" "8 32768 128" "1 32768 128"; do
      read -r b c h <<< "$shape"
      local tag="${body}_b${b}_c${c}_h${h//,/-}"
      env=(); [ "$body" = mma ] && env=(MLA_HIP_ATTENTION=mma)
      env ${env[@]+"${env[@]}"} timeout "$(limit bench 45)" "$MLA" bench decode --backend hip \
        --batch "$b" --contexts "$c" --heads "$h" --json "$OUT/bench_decode_$tag.json" \
        > "$OUT/bench_decode_$tag.log" 2>&1 || rc=1
    done
  done
  for f in "$OUT"/bench_decode_*.log; do
    echo "# $(basename "$f" .log)"
    grep -E "^batch|^ +[0-9]+ +[0-9]+ +[0-9]+ " "$f" | head -8
  done
  return $rc
}

for s in $STAGES; do
  note "$s"
  if ! "stage_$s"; then
    FAILED="$FAILED $s"
  fi
done
note "summary"
for f in probe.log conformance_attention_wgmma.log conformance_attention_mma.log \
         conformance_attention_cpasync.log conformance_attention_fma.log ctest_attention.log; do
  [ -f "$OUT/$f" ] && echo "$f: $(grep -E "pass|FAIL|conformance:|tests passed|tests failed" "$OUT/$f" | tail -n 1)"
done
[ -n "$FAILED" ] && { echo "failed stages:$FAILED"; exit 1; }
exit 0
