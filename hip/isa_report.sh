#!/usr/bin/env bash
# Device assembly of the HIP backend and a register/spill table per kernel.
#
#   AMD:    isa_report.sh <hip build dir> gfx942 [gfx950 ...]
#           (build dir of a MLA_HIP=AMD configure: it holds hip_flags.txt and
#           the generated device-library folder; `cmake --build . -t mla_hip_isa`
#           runs this). Writes <dir>/isa/<source>.<arch>.s and prints, per kernel,
#           .vgpr_count .agpr_count .sgpr_count .vgpr_spill_count .sgpr_spill_count
#           and .private_segment_fixed_size (scratch bytes) from the metadata.
#   NVIDIA: isa_report.sh --nvcc <nvcc> <hip build dir> sm_90 [...]
#           Writes <dir>/isa/<source>.<arch>.sass (cuobjdump) and prints ptxas'
#           resource usage (registers, spill stores/loads, stack).
#
# Exit status 1 when a kernel spills, so the report can gate a change.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
sources=(hip_backend convert mxfp4_quant mxfp4_dequant fp8_group_quant fp8_group_dequant)
sources+=(mxfp4_gemm flatten_quant) # MXFP4 GEMM path
sources+=(layernorm hadamard indexer_cache indexer_logits topk indexer_weights) # DSA indexer
sources+=(rmsnorm rope gemm linear batched_gemm cache_write cache_gather rope_cache) # prepare path
sources+=(attention) # attention core

nvcc=""
if [[ ${1:-} == --nvcc ]]; then
  nvcc=$2
  shift 2
fi
if [[ $# -lt 2 ]]; then
  sed -n '2,16p' "$0" >&2
  exit 2
fi
dir=$1
shift
mkdir -p "$dir/isa"
spills=0

if [[ -n $nvcc ]]; then
  cuobjdump=$(dirname "$nvcc")/cuobjdump
  for arch in "$@"; do
    for s in "${sources[@]}"; do
      cubin="$dir/isa/$s.$arch.cubin"
      log=$("$nvcc" -x cu -std=c++17 -arch="$arch" -cubin --resource-usage --fmad=false \
        -ftz=false -prec-div=true -prec-sqrt=true -O3 -DMLA_STATIC_DEFINE \
        -I"$root/include" -I"$root" "$here/$s.hip" -o "$cubin" 2>&1)
      [[ -x $cuobjdump ]] && "$cuobjdump" -sass "$cubin" >"$dir/isa/$s.$arch.sass"
      # ptxas prints "Compiling entry function '<mangled>'" then the usage line.
      awk -v arch="$arch" '
        /Compiling entry function/ { match($0, /'"'"'[^'"'"']+'"'"'/);
                                     fn = substr($0, RSTART + 1, RLENGTH - 2) }
        /bytes stack frame/ { st = $0; sub(/^[ \t]+/, "", st) }
        /Used [0-9]+ registers/ { split($0, a, "info    : "); printf "%-7s %s | %s | %s\n", arch, a[2], st, fn }
      ' <<<"$log" | c++filt
      if grep -Eq '[1-9][0-9]* bytes spill (stores|loads)' <<<"$log"; then spills=1; fi
    done
  done
  exit $spills
fi

read -r -a cmd <"$dir/hip_flags.txt"
printf '%-7s %5s %5s %5s %6s %6s %7s  %s\n' arch vgpr agpr sgpr vspill sspill scratch kernel
for arch in "$@"; do
  for s in "${sources[@]}"; do
    asm="$dir/isa/$s.$arch.s"
    "${cmd[@]}" --offload-arch="$arch" --cuda-device-only -S "$here/$s.hip" -o "$asm"
    # Kernel-level metadata keys are indented four spaces; argument keys deeper.
    awk -v arch="$arch" '
      /^    \.name:/                       { name = $2 }
      /^  - \.agpr_count:/                 { agpr = $3 }
      /^    \.private_segment_fixed_size:/ { scratch = $2 }
      /^    \.sgpr_count:/                 { sgpr = $2 }
      /^    \.sgpr_spill_count:/           { sspill = $2 }
      /^    \.vgpr_count:/                 { vgpr = $2 }
      /^    \.vgpr_spill_count:/           { vspill = $2
        printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", arch, name, vgpr, agpr, sgpr, vspill, sspill, scratch }
    ' "$asm" | c++filt | awk -F'\t' '{ printf "%-7s %5s %5s %5s %6s %6s %7s  %s\n", $1, $3, $4, $5, $6, $7, $8, $2
                                       if ($6 + $7 + $8 > 0) bad = 1 } END { exit bad }' || spills=1
  done
done
exit $spills
