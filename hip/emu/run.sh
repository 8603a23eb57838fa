#!/usr/bin/env bash
# Runs the HIP backend's kernels on the CPU, through the conformance harness,
# on a host without a GPU: a check of the kernels' index math, lane teams and
# bit logic before they meet a device (it says nothing about timing, memory
# ordering between blocks or the device compilers' code generation).
#
#   hip/emu/run.sh <HIP build dir> [32|64] [mla conformance options...]
#
# <HIP build dir>: a configured and built MLA_HIP=AMD or NVIDIA tree (its
# libmla.a, apps and conformance objects are reused; nothing there changes).
# 32 / 64: the emulated wave size (NVIDIA / gfx9). Everything goes to
# <HIP build dir>/emu<wave>/. Default options: --backend hip --suite generated.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "$1" && pwd)
wave=${2:-32}
shift $(($# >= 2 ? 2 : $#))
out="$build/emu$wave"
mkdir -p "$out"
sources=(hip_backend convert mxfp4_quant mxfp4_dequant fp8_group_quant fp8_group_dequant)
sources+=(mxfp4_gemm flatten_quant) # MXFP4 GEMM path
sources+=(layernorm hadamard indexer_cache indexer_logits topk indexer_weights) # DSA indexer
sources+=(rmsnorm rope gemm linear batched_gemm cache_write cache_gather rope_cache) # prepare path
sources+=(attention attention_expanded) # attention core
sources+=(paged_check) # index checks on the device

if [[ $wave == 32 ]]; then
  defs=(-D__CUDACC__)
else
  defs=(-D__HIP_DEVICE_COMPILE__ -D__GFX9__)
fi

objs=()
for s in "${sources[@]}"; do
  # kernel<<<grid, block, shmem, stream>>>(args) -> mla_emu_launch(grid, block, shmem, stream, kernel, args)
  python3 - "$root/hip/$s.hip" "$out/$s.cpp" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
pat = re.compile(r'([A-Za-z_]\w*(?:<[^<>;]*>)?)\s*<<<(.*?)>>>\s*\(', re.S)
out = pat.sub(lambda m: 'mla_emu_launch(%s, %s, ' % (m.group(2), m.group(1)), src)
open(sys.argv[2], 'w').write('#line 1 "%s"\n' % sys.argv[1] + out)
PY
  g++ -std=c++17 -O2 -pthread -Wall -Wextra -Werror -Wno-unused-function -Wno-unknown-pragmas "${defs[@]}" \
    -DMLA_STATIC_DEFINE -I"$here" -I"$root/include" -I"$root" -c "$out/$s.cpp" -o "$out/$s.o"
  objs+=("$out/$s.o")
done

# libmla.a with the emulated objects in place of the device ones.
cp "$build/libmla.a" "$out/libmla.a"
members=$(ar t "$out/libmla.a" | grep -E "^($(IFS='|'; echo "${sources[*]}"))(\.hip)?\.o\$" || true)
[[ -n $members ]] && ar d "$out/libmla.a" $members
ar r "$out/libmla.a" "${objs[@]}" 2>/dev/null

# The mla app, linked as the build linked it, against that archive.
cd "$build"
link=$(ninja -t commands apps/mla | tail -n 1)
link=${link//libmla.a/$out/libmla.a}
link=$(sed -E 's#[^ ]*(libamdhip64|libcudart)[^ ]*##g; s#CUDA::cudart##g' <<<"$link")
link=${link//-o apps\/mla/-o $out/mla}
link=${link#: && }
link=${link% && :}
eval "$link -pthread -lstdc++"
cd "$root"
opts=("$@")
[[ ${#opts[@]} -eq 0 ]] && opts=(--backend hip --suite generated)
exec "$out/mla" conformance "${opts[@]}"
