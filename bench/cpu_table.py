#!/usr/bin/env python3
"""The table of bench/run_cpu.sh: medians over its rounds.

  python3 bench/cpu_table.py OUT_DIR

For each instruction set the rounds ran (native, avx2) and each row of `mla
bench decode --backend cpu`: the median over the rounds of our median time,
of the PyTorch-CPU peer's (the faster of its bf16 and f32 variants, which is
named) and of their ratio (peer / ours: above 1 the library is faster), with
the medians of the copy and sgemm ceilings measured in the same runs, and the
ratio of the two processes' CPU time per call (a measure that other load on
a shared machine disturbs less than wall time). Then `mla demo`'s median
decode step next to the peer's layer step.
"""
import glob
import json
import os
import re
import sys


def median(v):
    v = sorted(x for x in v if x is not None)
    n = len(v)
    if n == 0:
        return None
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def load(path):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def step_ms(path):
    """The 'decode: median step X ms' figure of a demo / layer log."""
    try:
        with open(path) as fh:
            m = re.search(r"decode: median step ([0-9.]+) ms", fh.read())
    except OSError:
        return None
    return float(m.group(1)) if m else None


def main(out):
    rounds = sorted(glob.glob(os.path.join(out, "r*")))
    print("CPU decode vs PyTorch-CPU: medians over %d rounds (%s)" % (len(rounds), out))
    for isa in ("native", "avx2"):
        ours = [load(os.path.join(r, "decode_%s.json" % isa)) for r in rounds]
        peer = [load(os.path.join(r, "peer_decode_%s.json" % isa)) for r in rounds]
        ours = [o for o in ours if o]
        if not ours:
            continue
        key = lambda x: (x["batch"], x["context"], x["heads"], x["cache"],  # noqa: E731
                         x.get("topk", 0))
        copy = median([o["ceilings"]["copy_gbs"] for o in ours])
        mm = median([o["ceilings"]["matmul_gflops"] for o in ours])
        print("\n[%s] %s; ceilings: copy %.1f GB/s, sgemm %.1f GFLOP/s (%s)" % (
            isa, ours[0].get("device", ""), copy or 0, mm or 0,
            ours[0]["ceilings"].get("matmul_how", "")))
        print("%5s %6s %4s %-10s %11s %9s %8s %11s %6s %9s %9s" % (
            "batch", "ctx", "H", "cache", "ours_us", "GFLOP/s", "roof%", "torch_us", "dtype",
            "torch/us", "cpu t/us"))
        for row in ours[0]["rows"]:
            k = key(row)
            ts = [next((x["median_s"] for x in o["rows"] if key(x) == k and x["status"] == "ok"),
                       None) for o in ours]
            ps, dts, rs, crs = [], [], [], []
            for o, p in zip(ours, peer):
                po = next((x for x in (p or {}).get("rows", []) if key(x) == k), None)
                oo = next((x for x in o["rows"] if key(x) == k), None)
                if po and po["status"] == "ok":
                    ps.append(po["median_s"])
                    dts.append(po.get("compute", ""))
                    if oo and oo["status"] == "ok":
                        rs.append(po["median_s"] / oo["median_s"])
                        if po.get("cpu_s") and oo.get("cpu_s"):
                            crs.append(po["cpu_s"] / oo["cpu_s"])
            t, p, r, cr = median(ts), median(ps), median(rs), median(crs)
            print("%5d %6d %4d %-10s " % k[:4], end="")
            if t is None:
                print("%11s" % row["status"])
                continue
            g = row["flops"] / t / 1e9
            roof = median([next((x["ratio"] for x in o["rows"] if key(x) == k), None)
                           for o in ours])
            print("%11.1f %9.1f %7.1f%% %11s %6s %9s %9s" % (
                1e6 * t, g, 100 * (roof or 0), "%.1f" % (1e6 * p) if p else "-",
                "/".join(sorted(set(dts))) or "-", "%.2fx" % r if r else "-",
                "%.2fx" % cr if cr else "-"))
        demo = median([step_ms(os.path.join(r, "demo_%s.txt" % isa)) for r in rounds])
        layer = median([step_ms(os.path.join(r, "layer_%s.txt" % isa)) for r in rounds])
        if demo and layer:
            print("mla demo (DeepSeek-V2-Lite, batch 1, context 272): median step %.3f ms; "
                  "PyTorch layer step %.3f ms; torch/ours %.2fx" % (demo, layer, layer / demo))
    print("\ntorch/us > 1: the library is faster; each figure the median over the rounds of "
          "each round's median; torch's dtype is the faster of bf16 and f32 per row; cpu t/us: "
          "the same ratio of the processes' CPU time per call (both sides use every core: "
          "robust to other load on a shared machine)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "out/cpu"))
