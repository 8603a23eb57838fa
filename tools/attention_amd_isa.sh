#!/usr/bin/env bash
# ISA of the pipelined gfx942 / gfx950 attention body (hip/attention_mfma_pipe.h),
# the numbers docs/ATTENTION_AMD.md reports:
#
#   tools/attention_amd_isa.sh <hip-amd build dir> [gfx942 gfx950]
#
# Compiles hip/attention.hip device-only for the targets (the build's
# hip_flags.txt, clang-22, --save-temps: <dir>/isa/attention-hip-amdgcn-amd-
# amdhsa-<arch>.s and the code object .out, disassembled by llvm-objdump to
# .dis), then prints per attention_ap_kernel instance the resource metadata
# (VGPR, AGPR, SGPR, spills, scratch bytes) and the static instruction mix of
# its tile loop (the innermost loop holding the MFMAs).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(cd "$1" && pwd)
shift
archs=("$@")
[[ ${#archs[@]} -eq 0 ]] && archs=(gfx942 gfx950)
read -r -a cmd <"$dir/hip/hip_flags.txt"
mkdir -p "$dir/isa"
objdump=$(dirname "${cmd[0]}")/llvm-objdump
(cd "$dir/isa" && "${cmd[@]}" "${archs[@]/#/--offload-arch=}" --cuda-device-only -c --save-temps \
  "$root/hip/attention.hip" -o attention.device.o)
for arch in "${archs[@]}"; do
  base="$dir/isa/attention-hip-amdgcn-amd-amdhsa-$arch"
  "$objdump" -d --mcpu="$arch" "$base.out" >"$base.dis"
  python3 - "$base.s" "$arch" <<'PY'
import collections, re, subprocess, sys
path, arch = sys.argv[1], sys.argv[2]
text = open(path).read()
# resource metadata per kernel (the amdhsa.kernels list)
meta = {}
for k in re.split(r'\n  - ', text.split('amdhsa.kernels:')[1])[1:]:
    f = dict(re.findall(r'(?m)^(?:    )?\.(\w+):[ \t]+(\S+)', k))
    if 'name' in f:
        meta[f['name']] = f
def loop_mix(name):
    body = text.split('\n' + name + ':', 1)[1].split('.Lfunc_end', 1)[0]
    blocks, cur = [], None
    for ln in body.split('\n'):
        m = re.match(r'^(\.LBB\w+|; %bb\.\d+):(.*)', ln)
        if m:
            cur = [m.group(1), m.group(2), []]
            blocks.append(cur)
        elif cur and not cur[2] and ln.strip().startswith(';'):
            cur[1] += ln  # the label's loop comment on the next line
        elif cur and ln.startswith('\t') and ln.strip() and not ln.strip().startswith((';', '.')):
            cur[2].append(ln.split()[0])
    def loop(b):
        m = re.search(r'Loop: Header=(\w+) Depth=(\d+)', b[1])
        if m:
            return m.group(1), int(m.group(2))
        m = re.search(r'Loop Header: Depth=(\d+)', b[1])
        return (b[0].lstrip('.').replace('LBB', 'BB'), int(m.group(1))) if m else (None, 0)
    n = collections.Counter()
    for b in blocks:
        if loop(b)[0]:
            n[loop(b)] += sum(i.startswith('v_mfma') for i in b[2])
    if not n or max(n.values()) == 0:
        return 0, None  # an empty instance (a geometry this target lacks)
    hdr = max(n.items(), key=lambda kv: (kv[1], kv[0][1]))[0][0]
    ins = [i for b in blocks if loop(b)[0] == hdr for i in b[2]]
    c = collections.Counter()
    for i in ins:
        if i.startswith('v_mfma'): c[i] += 1
        elif i.startswith('ds_read'): c['lds read ' + i[8:]] += 1
        elif i.startswith('ds_write'): c['lds write ' + i[9:]] += 1
        elif i.startswith(('global_load', 'flat_load', 'buffer_load')): c['global load ' + i] += 1
        elif i.startswith('scratch_'): c['scratch'] += 1
        elif i in ('s_barrier', 's_waitcnt'): c[i] += 1
        elif i.startswith('v_exp'): c['valu exp'] += 1
        elif i.startswith('v_'): c['valu other'] += 1
        elif i.startswith('s_'): c['salu / branch'] += 1
        else: c['other'] += 1
    return len(ins), c
for name, f in sorted(meta.items()):
    if 'attention_ap_kernel' not in name:
        continue
    dm = subprocess.run(['c++filt', name], capture_output=True, text=True).stdout.strip()
    inst = re.search(r'attention_ap_kernel<(.*?)>', dm).group(1)
    print('%s %-16s vgpr %s agpr %s sgpr %s vgpr_spill %s sgpr_spill %s scratch %s' % (
        arch, '<' + inst + '>', f['vgpr_count'], f.get('agpr_count', '?'), f['sgpr_count'],
        f['vgpr_spill_count'], f['sgpr_spill_count'], f['private_segment_fixed_size']))
    total, c = loop_mix(name)
    if c is None:
        print('    (no body on this target)')
        continue
    print('    tile loop: %d instructions; ' % total +
          ', '.join('%s %d' % kv for kv in sorted(c.items())))
PY
done
