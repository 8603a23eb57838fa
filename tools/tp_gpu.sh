#!/usr/bin/env bash
# Tensor parallelism on GPUs (docs/TENSOR_PARALLEL.md): python/examples/tp_layer.py
# and python/tests/test_tp.py on the GPU machine (python3 with torch (CUDA) and NCCL).
#
#   bash tools/tp_gpu.sh build   # build/gpu through bench/run_gpu.sh's build stage
#   bash tools/tp_gpu.sh one     # one GPU: what runs now on nvidia-h200
#   bash tools/tp_gpu.sh multi   # >= 2 GPUs of one host (nvidia-h200-x2 / -x4 / -x8)
#
# one: the TP tests (pytest python/tests/test_tp.py: world sizes 1, 2, 4, 8
#   simulated on the GPU, world size 1 with NCCL, 2 gloo processes); the
#   example's simulated world sizes on the GPU for the 16-head test config
#   (bf16 and fp8 weights) and DeepSeek-V3's sizes, checked against the
#   unsliced layer (f32 activations, splits 1: the bound's premise); world
#   size 1 through torchrun + NCCL, checked, then timed at DeepSeek-V3 sizes
#   with the engine's settings (bf16 activations, the library's splits).
# multi: torchrun --nproc_per_node W for W = 2, 4, 8 (as many as there are
#   GPUs): the test config checked, DeepSeek-V3 sizes checked and timed.
# Every line the example prints is in $OUT/tp_*.log; the summary lines are
# printed at the end. NCCL_NVLS_ENABLE=0 throughout (no NVLink multicast).
# TP_ONLY="sim_v3 nccl_w1_v3_bf16" runs only the named steps (to split a run
# over several calls of at most 10 minutes; the DeepSeek-V3 checkpoint is
# generated into $TP_WORK once and kept while the machine is).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build/gpu}
OUT=${OUT:-$PWD/out/tp}
PY=${PYTHON:-python3}
WORK=${TP_WORK:-/tmp/libmla-tp}
mkdir -p "$OUT" "$WORK"
export LIBMLA_LIBRARY=$PWD/$BUILD PYTHONPATH=$PWD/python NCCL_NVLS_ENABLE=0
EX=python/examples/tp_layer.py
V3=$WORK/DeepSeek-V3-layer0
V3_STEPS=(--checkpoint "$V3" --layer 0 --batch 16 --prefill 32 --decode 32)
FAILED=""

step() {  # name, seconds, command...
  local name=$1 secs=$2
  shift 2
  [[ -z ${TP_ONLY:-} || " $TP_ONLY " == *" $name "* ]] || return 0
  echo "=== $name: $*" | tee "$OUT/tp_$name.log"
  if timeout "$secs" "$@" >> "$OUT/tp_$name.log" 2>&1; then
    grep -E "world size|passed|skipped" "$OUT/tp_$name.log" | tail -n 12
  else
    tail -n 30 "$OUT/tp_$name.log"
    FAILED="$FAILED $name"
  fi
}

# torchrun W ARGS: the example on W processes (a command line, not a shell
# function, so that step's timeout can run it)
torchrun_cmd() { echo "$PY -m torch.distributed.run --standalone --nproc_per_node $1 $EX --device gpu"; }

v3_checkpoint() {  # one seeded DeepSeek-V3 attention layer (357 MB), made once
  [[ -f $V3/config.json ]] || TP_ONLY="" step v3_generate 300 "$PY" -c \
    "import libmla; libmla.checkpoint_generate('$V3', 'DeepSeek-V3', count=1, shards=2)"
}

case "${1:-one}" in
build)
  BUILD_DIR=$BUILD OUT=$OUT bash bench/run_gpu.sh build
  ;;
one)
  "$PY" -c 'import torch, torch.distributed as d; print("torch", torch.__version__,
    "cuda", torch.version.cuda, "gpus", torch.cuda.device_count(), "nccl", d.is_nccl_available())' \
    | tee "$OUT/tp_machine.log"
  step pytest 300 "$PY" -m pytest -q -p no:cacheprovider -rs python/tests/test_tp.py
  step sim_bf16 120 "$PY" "$EX" --simulate 1,2,4,8 --device gpu --weights bf16
  step sim_fp8 120 "$PY" "$EX" --simulate 1,2,4,8 --device gpu --weights fp8
  step nccl_w1 120 $(torchrun_cmd 1) --workdir "$WORK/test-config"
  v3_checkpoint
  step sim_v3 300 "$PY" "$EX" --simulate 1,2,4,8 --device gpu "${V3_STEPS[@]}"
  step nccl_w1_v3_bf16 180 $(torchrun_cmd 1) "${V3_STEPS[@]}" --act bf16 --splits 0
  ;;
multi)
  n=$("$PY" -c 'import torch; print(torch.cuda.device_count())')
  echo "GPUs: $n" | tee "$OUT/tp_machine.log"
  nvidia-smi topo -m >> "$OUT/tp_machine.log" 2>&1
  [[ $n -ge 2 ]] || { echo "multi needs >= 2 GPUs"; exit 2; }
  v3_checkpoint
  for w in 2 4 8; do
    [[ $w -le $n ]] || continue
    step "nccl_w${w}" 120 $(torchrun_cmd "$w") --workdir "$WORK/test-config"
    step "nccl_w${w}_fp8" 120 $(torchrun_cmd "$w") --workdir "$WORK/test-config-fp8" --weights fp8
    step "nccl_w${w}_v3" 180 $(torchrun_cmd "$w") "${V3_STEPS[@]}"
    step "nccl_w${w}_v3_bf16" 180 $(torchrun_cmd "$w") "${V3_STEPS[@]}" --act bf16 --splits 0
  done
  step nccl_w1_v3_bf16 180 $(torchrun_cmd 1) "${V3_STEPS[@]}" --act bf16 --splits 0
  ;;
*)
  echo "usage: bash tools/tp_gpu.sh build|one|multi" >&2
  exit 2
  ;;
esac
echo
echo "=== summary"
grep -h "world size" "$OUT"/tp_*.log
if [[ -n $FAILED ]]; then
  echo "FAILED:$FAILED"
  exit 1
fi
echo "all TP checks passed"
