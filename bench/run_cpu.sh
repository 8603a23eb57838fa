#!/usr/bin/env bash
# The CPU attention decode and the demo's layer step next to their
# PyTorch-CPU peers, in one job on one machine:
#
#   bash bench/run_cpu.sh [ROUNDS]      (default 3 rounds)
#   THREADS=1 bash bench/run_cpu.sh     (one thread on both sides: with the CPU-time
#                                        column, the measure least disturbed when
#                                        other work shares the machine)
#
# Each round runs, for the host's own instruction set ("native") and for an
# AVX2-only machine as far as one can be imitated here ("avx2": the library
# with MLA_CPU_ISA=avx2; torch with ATen's kernels capped at AVX2
# (ATEN_CPU_CAPABILITY=avx2) and oneDNN's bf16 GEMM off (--no-mkldnn: torch
# uses it only where the CPU has AVX-512) so that its compute is f32 (its
# own bf16 GEMM runs at about 1 GFLOP/s: no engine would take it), and
# OpenBLAS at Haswell (OPENBLAS_CORETYPE=Haswell, which also sets both
# sides' sgemm ceiling)):
#   mla bench decode --backend cpu                 -> $OUT/rN/decode_ISA.json
#   python3 bench/peer_torch.py --decode --device cpu (bf16 and f32, the faster)
#                                                  -> $OUT/rN/peer_decode_ISA.json
#   mla demo --backend cpu                         -> $OUT/rN/demo_ISA.txt
#   python3 bench/peer_torch.py --layer --device cpu -> $OUT/rN/layer_ISA.txt
# then bench/cpu_table.py prints the medians over the rounds: per decode row
# ours, PyTorch's, the ratio, and the copy and sgemm ceilings; the demo's
# median step next to the peer's. The load average is printed before each
# round: the timings mean something only when it is low. Needs torch for the
# python3 given by $PYTHON (default /usr/bin/python3, Debian's python3-torch).
set -u
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
OUT=${OUT:-$PWD/out/cpu}
BUILD=${BUILD_DIR:-build/default}
MLA=$BUILD/apps/mla
PY=${PYTHON:-/usr/bin/python3}
MAX_CALL_S=${MAX_CALL_S:-10} # both sides: the rows of 128 heads take seconds in PyTorch
THREADS=${THREADS:-0}        # 0: every logical CPU (both sides' default)
THR_OURS=() THR_PEER=() THR_DEMO=()
if [ "$THREADS" -gt 0 ]; then # mla demo takes the context's default: OpenMP's
  THR_OURS=(--threads "$THREADS") THR_PEER=(--threads "$THREADS")
  THR_DEMO=(OMP_NUM_THREADS="$THREADS")
fi
mkdir -p "$OUT"
[ -x "$MLA" ] || { echo "run_cpu.sh: no $MLA (build first)"; exit 1; }
{ grep -m1 "model name" /proc/cpuinfo; nproc; grep -m1 flags /proc/cpuinfo | tr ' ' '\n' \
    | grep -E '^(avx2|fma|avx512f|avx512_bf16|amx_bf16)$' | tr '\n' ' '; echo;
  git rev-parse HEAD; $PY -c 'import torch; print("torch", torch.__version__)'; } \
  > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

run_isa() { # round isa
  local d=$OUT/r$1 isa=$2
  local -a env_ours=() env_peer=() peer_opt=()
  if [ "$isa" = avx2 ]; then
    env_ours=(MLA_CPU_ISA=avx2 OPENBLAS_CORETYPE=Haswell)
    env_peer=(ATEN_CPU_CAPABILITY=avx2 OPENBLAS_CORETYPE=Haswell)
    peer_opt=(--no-mkldnn --peer-dtype f32)
  fi
  env "${env_ours[@]}" "$MLA" bench decode --backend cpu --max-call-s "$MAX_CALL_S" "${THR_OURS[@]}" \
    --json "$d/decode_$isa.json" \
    > "$d/decode_$isa.log" 2> "$d/decode_$isa.err" || echo "round $1 $isa: mla bench decode failed"
  env "${env_peer[@]}" $PY bench/peer_torch.py --decode --device cpu "${peer_opt[@]}" \
    --max-call-s "$MAX_CALL_S" "${THR_PEER[@]}" --json "$d/peer_decode_$isa.json" > "$d/peer_decode_$isa.log" 2> "$d/peer_decode_$isa.err" \
    || echo "round $1 $isa: peer_torch.py --decode failed"
  env "${env_ours[@]}" "${THR_DEMO[@]}" "$MLA" demo --backend cpu > "$d/demo_$isa.txt" 2>&1 \
    || echo "round $1 $isa: mla demo failed"
  env "${env_peer[@]}" $PY bench/peer_torch.py --layer --device cpu --config DeepSeek-V2-Lite \
    "${peer_opt[@]}" "${THR_PEER[@]}" \
    > "$d/layer_$isa.txt" 2>&1 \
    || echo "round $1 $isa: peer_torch.py --layer failed"
}

for r in $(seq 1 "$ROUNDS"); do
  mkdir -p "$OUT/r$r"
  echo "round $r/$ROUNDS: $(uptime)"
  for isa in native avx2; do
    run_isa "$r" "$isa"
  done
done
echo "end: $(uptime)"
$PY bench/cpu_table.py "$OUT"
