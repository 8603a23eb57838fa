#!/usr/bin/env bash
# One job on the NVIDIA H200 machine: build the HIP backend for sm_90a with
# nvcc, check it, and benchmark the prepare path next to its PyTorch peer,
# so that the GPU ceilings, the peer and our numbers all come from one job.
#
#   bash bench/run_gpu.sh [STAGE ...]      (default: all stages, in order)
#
# Stages: info build conformance peer bench mxfp4 indexer decode cpu compare
#         ceilings sparse prefill
#   info        nvidia-smi, lscpu, torch version, git commit -> $OUT/machine.txt
#   build       cmake -G Ninja into build/gpu (kept between calls on a warm machine)
#   conformance mla conformance --backend hip, then its attention cases with
#               MLA_HIP_ATTENTION=cpasync, =fma and =wgmma (the other key path, the plain
#               body, the sm_90a body on every call it can take),
#               the GEMMs and expanded attention with MLA_HIP_GEMM=mma MLA_HIP_ATTENTION=mma,
#               indexer logits with MLA_HIP_LOGITS=mma, top-k with MLA_HIP_TOPK_G=1, 2
#   peer        python3 bench/peer_torch.py --json $OUT/peer.json (its own copy and
#               bf16 matmul ceilings, then the same table)
#   bench       mla bench prepare --backend hip --json $OUT/bench_hip.json
#   mxfp4       mla bench mxfp4 --backend hip --json $OUT/bench_mxfp4_hip.json (a16wfp4 /
#               a4w4 vs bf16 batched GEMM on W_kc / W_vc, fused flatten quants)
#   indexer     python3 bench/peer_torch_indexer.py --json $OUT/peer_indexer.json (the
#               plain-PyTorch search), then mla bench indexer --backend hip --json
#               $OUT/bench_indexer_hip.json (paged MQA logits + top-k vs their roofline,
#               contexts 4K..128K, batch 1..64), then the ratio table ->
#               $OUT/indexer_side_by_side.txt
#   decode      attention decode side by side: python3 bench/peer_torch.py --decode (plain
#               PyTorch paged decode, its own ceilings) -> $OUT/peer_decode.json, then
#               mla bench decode --backend hip -> $OUT/bench_decode_hip.json, then the
#               ratio table (ours vs PyTorch) -> $OUT/decode_side_by_side.txt
#   cpu         mla bench prepare --backend cpu on the GPU host's CPU
#   compare     the side-by-side table: ours vs the peer
#   ceilings    mla bench ceilings --backend hip: copy bandwidth, cuBLAS bf16 GEMM and the
#               theoretical peak -> $OUT/ceilings_hip.json
#   sparse      mla bench decode --backend hip --sparse (top-k 2048 of a 32K context, bf16 and
#               FP8_SCALED caches, heads 16/64/128, batch 1..128) -> $OUT/bench_sparse_hip.json
#   prefill     python3 bench/peer_torch.py --prefill (torch SDPA, expanded 192/128 form,
#               causal) -> $OUT/peer_prefill.json, then mla bench prefill --backend hip ->
#               $OUT/bench_prefill_hip.json, then the ratio table -> $OUT/prefill_side_by_side.txt
# Every mla bench measures its device matmul ceiling itself: cuBLAS's bf16
# GEMM, loaded at run time from $MLA_BENCH_BLAS, which is set below to the
# libcublas of the job's python3 (PyTorch's nvidia-cublas wheel) when there
# is one (bench/ceilings_device.c).
# Each call of the device tool empties $OUT: run the stages that need each
# other's files (peer -> bench -> compare) in one call. Logs: $OUT/*.log;
# the summary tables are printed last. Stage time limits keep one call under
# the tool's 10 minutes: build 420 s, conformance 300 s, peer 240 s,
# bench 240 s, mxfp4 120 s, indexer 240 s (peer 120 s, ours 120 s), decode 300 s (peer 150 s, ours 150 s),
# cpu 120 s, ceilings 90 s, sparse 150 s, prefill 240 s (peer 120 s, ours 120 s)
# (override with RUN_GPU_<STAGE>_S).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/gpu}
mkdir -p "$OUT"
BUILD=${BUILD_DIR:-build/gpu}
MLA=$BUILD/apps/mla
PY=${PYTHON:-python3}
if [ -z "${MLA_BENCH_BLAS:-}" ]; then
  MLA_BENCH_BLAS=$($PY -c 'import glob, os, nvidia
print(next(iter(sorted(p for d in nvidia.__path__ for p in glob.glob(os.path.join(d, "*", "lib", "libcublas.so.*")))), ""))' 2>/dev/null)
  export MLA_BENCH_BLAS
fi
STAGES=${*:-info build conformance peer bench mxfp4 indexer decode cpu compare ceilings sparse prefill}
FAILED=""

note() { printf '\n=== %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }
limit() { local v="RUN_GPU_$(echo "$1" | tr a-z A-Z)_S"; echo "${!v:-$2}"; }

stage_info() {
  {
    echo "# git"; git rev-parse HEAD 2>/dev/null; git status --short 2>/dev/null | head -20
    echo "# nvidia-smi"; nvidia-smi 2>&1
    echo "# nvidia-smi -q (clocks)"; nvidia-smi -q -d CLOCK 2>&1 | head -40
    echo "# lscpu"; lscpu 2>&1
    echo "# torch"; $PY -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0))' 2>&1
    echo "# nvcc"; /usr/local/cuda/bin/nvcc --version 2>&1 | tail -2
    echo "# cmake / ninja / cc"; cmake --version | head -1; ninja --version; cc --version | head -1
  } > "$OUT/machine.txt" 2>&1
  grep -m1 "Model name" "$OUT/machine.txt"
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv 2>&1
  return 0
}

stage_build() {
  timeout "$(limit build 420)" cmake -S . -B "$BUILD" -G Ninja -DMLA_HIP=NVIDIA -DMLA_GPU_TARGETS="${MLA_GPU_TARGETS:-90a}" \
    -DMLA_WITH_SLEEF=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > "$OUT/configure.log" 2>&1 \
    || { tail -30 "$OUT/configure.log"; return 1; }
  timeout "$(limit build 420)" cmake --build "$BUILD" > "$OUT/build.log" 2>&1 \
    || { grep -E "error|Error" "$OUT/build.log" | head -40; tail -20 "$OUT/build.log"; return 1; }
  tail -1 "$OUT/build.log"
  "$MLA" info | tee "$OUT/info.txt"
}

stage_conformance() {
  timeout "$(limit conformance 300)" "$MLA" conformance --backend hip --require-device > "$OUT/conformance_hip.log" 2>&1
  local rc=$?
  tail -25 "$OUT/conformance_hip.log"
  # the attention cases again on the body's other key path, on the plain body
  # and on the sm_90a body wherever it can run
  local v
  for v in cpasync fma wgmma; do
    MLA_HIP_ATTENTION=$v timeout 120 "$MLA" conformance --backend hip --require-device --op attention \
      > "$OUT/conformance_hip_attention_$v.log" 2>&1 || rc=1
    echo "attention, MLA_HIP_ATTENTION=$v: $(grep -E '^conformance:' "$OUT/conformance_hip_attention_$v.log")"
  done
  # the indexer logits on the mma.sync body where the wgmma one runs, and top-k
  # with one and two blocks per row
  MLA_HIP_LOGITS=mma timeout 120 "$MLA" conformance --backend hip --require-device --op indexer_logits \
    > "$OUT/conformance_hip_logits_mma.log" 2>&1 || rc=1
  echo "indexer_logits, MLA_HIP_LOGITS=mma: $(grep -E '^conformance:' "$OUT/conformance_hip_logits_mma.log")"
  # the GEMMs and the expanded attention on the mma.sync tiles and body where
  # the sm_90a wgmma ones run
  MLA_HIP_GEMM=mma MLA_HIP_ATTENTION=mma timeout 120 "$MLA" conformance --backend hip --require-device \
    --op 'linear*,batched_gemm*,attention_expanded*' > "$OUT/conformance_hip_gemm_mma.log" 2>&1 || rc=1
  echo "GEMMs + expanded, MLA_HIP_GEMM=mma MLA_HIP_ATTENTION=mma: $(grep -E '^conformance:' "$OUT/conformance_hip_gemm_mma.log")"
  for v in 1 2; do
    MLA_HIP_TOPK_G=$v timeout 120 "$MLA" conformance --backend hip --require-device --op topk \
      > "$OUT/conformance_hip_topk_g$v.log" 2>&1 || rc=1
    echo "topk, MLA_HIP_TOPK_G=$v: $(grep -E '^conformance:' "$OUT/conformance_hip_topk_g$v.log")"
  done
  return $rc
}

stage_peer() {
  timeout "$(limit peer 240)" $PY bench/peer_torch.py --json "$OUT/peer.json" \
    > "$OUT/peer.log" 2> "$OUT/peer.err"
  local rc=$?
  tail -5 "$OUT/peer.err"
  return $rc
}

stage_bench() {
  timeout "$(limit bench 240)" "$MLA" bench prepare --backend hip --json "$OUT/bench_hip.json" \
    > "$OUT/bench_hip.log" 2> "$OUT/bench_hip.err"
  local rc=$?
  tail -5 "$OUT/bench_hip.err"
  return $rc
}

stage_mxfp4() {
  timeout "$(limit mxfp4 120)" "$MLA" bench mxfp4 --backend hip --json "$OUT/bench_mxfp4_hip.json" \
    > "$OUT/bench_mxfp4_hip.log" 2> "$OUT/bench_mxfp4_hip.err"
  local rc=$?
  tail -3 "$OUT/bench_mxfp4_hip.err"
  return $rc
}

stage_indexer() {
  local half=$(( $(limit indexer 240) / 2 )) rc=0
  timeout "$half" $PY bench/peer_torch_indexer.py --json "$OUT/peer_indexer.json" \
    > "$OUT/peer_indexer.log" 2> "$OUT/peer_indexer.err" || rc=1
  tail -3 "$OUT/peer_indexer.err"
  timeout "$half" "$MLA" bench indexer --backend hip --json "$OUT/bench_indexer_hip.json" \
    > "$OUT/bench_indexer_hip.log" 2> "$OUT/bench_indexer_hip.err" || rc=1
  tail -3 "$OUT/bench_indexer_hip.err"
  if [ -f "$OUT/bench_indexer_hip.json" ] && [ -f "$OUT/peer_indexer.json" ]; then
    $PY bench/peer_torch_indexer.py --compare "$OUT/bench_indexer_hip.json" "$OUT/peer_indexer.json" \
      > "$OUT/indexer_side_by_side.txt" 2>&1 || rc=1
  else
    rc=1
  fi
  return $rc
}

stage_decode() {
  local half=$(( $(limit decode 300) / 2 )) rc=0
  timeout "$half" $PY bench/peer_torch.py --decode --json "$OUT/peer_decode.json" \
    > "$OUT/peer_decode.log" 2> "$OUT/peer_decode.err" || rc=1
  tail -3 "$OUT/peer_decode.err"
  timeout "$half" "$MLA" bench decode --backend hip --json "$OUT/bench_decode_hip.json" \
    > "$OUT/bench_decode_hip.log" 2> "$OUT/bench_decode_hip.err" || rc=1
  tail -3 "$OUT/bench_decode_hip.err"
  if [ -f "$OUT/bench_decode_hip.json" ] && [ -f "$OUT/peer_decode.json" ]; then
    $PY bench/peer_torch.py --compare "$OUT/bench_decode_hip.json" "$OUT/peer_decode.json" \
      > "$OUT/decode_side_by_side.txt" 2>&1 || rc=1
  else
    rc=1
  fi
  return $rc
}

stage_cpu() {
  timeout "$(limit cpu 120)" "$MLA" bench prepare --backend cpu --json "$OUT/bench_cpu.json" \
    > "$OUT/bench_cpu.log" 2> "$OUT/bench_cpu.err"
  local rc=$?
  tail -3 "$OUT/bench_cpu.err"
  return $rc
}

stage_compare() {
  [ -f "$OUT/bench_hip.json" ] && [ -f "$OUT/peer.json" ] || { echo "compare: needs bench_hip.json and peer.json from this call"; return 1; }
  $PY bench/peer_torch.py --compare "$OUT/bench_hip.json" "$OUT/peer.json" > "$OUT/side_by_side.txt" 2>&1
}

stage_ceilings() {
  timeout "$(limit ceilings 90)" "$MLA" bench ceilings --backend hip --json "$OUT/ceilings_hip.json" \
    > "$OUT/ceilings_hip.log" 2> "$OUT/ceilings_hip.err"
  local rc=$?
  cat "$OUT/ceilings_hip.err"
  return $rc
}

stage_sparse() {
  timeout "$(limit sparse 150)" "$MLA" bench decode --backend hip --sparse \
    --json "$OUT/bench_sparse_hip.json" > "$OUT/bench_sparse_hip.log" 2> "$OUT/bench_sparse_hip.err"
  local rc=$?
  tail -3 "$OUT/bench_sparse_hip.err"
  return $rc
}

stage_prefill() {
  local half=$(( $(limit prefill 240) / 2 )) rc=0
  timeout "$half" $PY bench/peer_torch.py --prefill --json "$OUT/peer_prefill.json" \
    > "$OUT/peer_prefill.log" 2> "$OUT/peer_prefill.err" || rc=1
  tail -3 "$OUT/peer_prefill.err"
  timeout "$half" "$MLA" bench prefill --backend hip --json "$OUT/bench_prefill_hip.json" \
    > "$OUT/bench_prefill_hip.log" 2> "$OUT/bench_prefill_hip.err" || rc=1
  tail -3 "$OUT/bench_prefill_hip.err"
  if [ -f "$OUT/bench_prefill_hip.json" ] && [ -f "$OUT/peer_prefill.json" ]; then
    $PY bench/peer_torch.py --compare "$OUT/bench_prefill_hip.json" "$OUT/peer_prefill.json" \
      > "$OUT/prefill_side_by_side.txt" 2>&1 || rc=1
  else
    rc=1
  fi
  return $rc
}

for s in $STAGES; do
  note "$s"
  if ! "stage_$s"; then
    echo "stage $s FAILED (see $OUT)"
    FAILED="$FAILED $s"
    [ "$s" = build ] && break
  fi
done

# The tables last: the device tool returns only the end of the output (the
# full logs and JSON files come back under $OUT).
for f in bench_cpu.log peer.log; do
  [ -f "$OUT/$f" ] && { note "$f (head; full table in \$OUT/$f)"; head -14 "$OUT/$f"; }
done
for f in bench_hip.log side_by_side.txt bench_mxfp4_hip.log bench_indexer_hip.log \
         indexer_side_by_side.txt bench_decode_hip.log decode_side_by_side.txt ceilings_hip.log \
         bench_sparse_hip.log bench_prefill_hip.log prefill_side_by_side.txt; do
  [ -f "$OUT/$f" ] && { note "$f"; cat "$OUT/$f"; }
done
note "done; failed stages:${FAILED:- none}"
[ -z "$FAILED" ]
