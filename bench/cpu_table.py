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

medians(OUT_DIR) returns the same figures as data (tools/docs_gen.py
record --cpu-run stores them).
"""
import glob
import json
import os
import re
import sys

ISAS = ("native", "avx2")


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


def row_key(x):
    return (x["batch"], x["context"], x["heads"], x["cache"], x.get("topk", 0))


def isa_medians(rounds, isa):
    """One instruction set's figures over the rounds, or None when no round has our JSON."""
    ours = [load(os.path.join(r, "decode_%s.json" % isa)) for r in rounds]
    peer = [load(os.path.join(r, "peer_decode_%s.json" % isa)) for r in rounds]
    pairs = [(o, p) for o, p in zip(ours, peer) if o]
    if not pairs:
        return None
    first = pairs[0][0]
    rows = []
    for row in first["rows"]:
        k = row_key(row)
        ts, ps, dts, rs, crs, roofs = [], [], [], [], [], []
        for o, p in pairs:
            oo = next((x for x in o["rows"] if row_key(x) == k), None)
            po = next((x for x in (p or {}).get("rows", []) if row_key(x) == k), None)
            o_ok = oo is not None and oo["status"] == "ok"
            if o_ok:
                ts.append(oo["median_s"])
                roofs.append(oo.get("ratio"))
            if po and po["status"] == "ok":
                ps.append(po["median_s"])
                dts.append(po.get("compute", ""))
                if o_ok:
                    rs.append(po["median_s"] / oo["median_s"])
                    if po.get("cpu_s") and oo.get("cpu_s"):
                        crs.append(po["cpu_s"] / oo["cpu_s"])
        t = median(ts)
        rows.append({
            "batch": k[0], "context": k[1], "heads": k[2], "cache": k[3], "topk": k[4],
            "status": "ok" if t is not None else row["status"], "flops": row["flops"],
            "median_s": t, "gflops": row["flops"] / t / 1e9 if t else None,
            "ratio": median(roofs), "peer_median_s": median(ps),
            "peer_compute": "/".join(sorted(set(d for d in dts if d))) or None,
            "peer_ratio": median(rs), "cpu_time_ratio": median(crs)})
    c = first["ceilings"]
    return {
        "device": first.get("device", ""), "rounds": len(pairs),
        "copy_gbs": median([o["ceilings"].get("copy_gbs") for o, _ in pairs]),
        "matmul_gflops": median([o["ceilings"].get("matmul_gflops") for o, _ in pairs]),
        "matmul_how": c.get("matmul_how", ""),
        "rows": rows,
        "demo_step_ms": median([step_ms(os.path.join(r, "demo_%s.txt" % isa)) for r in rounds]),
        "layer_step_ms": median([step_ms(os.path.join(r, "layer_%s.txt" % isa))
                                 for r in rounds]),
    }


def medians(out):
    """{"rounds": n, "isas": {isa: isa_medians(...)}} of a run_cpu.sh output folder."""
    rounds = sorted(glob.glob(os.path.join(out, "r*")))
    got = {isa: isa_medians(rounds, isa) for isa in ISAS}
    return {"rounds": len(rounds), "isas": {k: v for k, v in got.items() if v}}


def main(out):
    m = medians(out)
    print("CPU decode vs PyTorch-CPU: medians over %d rounds (%s)" % (m["rounds"], out))
    for isa, s in m["isas"].items():
        print("\n[%s] %s; ceilings: copy %.1f GB/s, sgemm %.1f GFLOP/s (%s)" % (
            isa, s["device"], s["copy_gbs"] or 0, s["matmul_gflops"] or 0, s["matmul_how"]))
        print("%5s %6s %4s %-10s %11s %9s %8s %11s %6s %9s %9s" % (
            "batch", "ctx", "H", "cache", "ours_us", "GFLOP/s", "roof%", "torch_us", "dtype",
            "torch/us", "cpu t/us"))
        for r in s["rows"]:
            print("%5d %6d %4d %-10s " % (r["batch"], r["context"], r["heads"], r["cache"]),
                  end="")
            t, p, pr, cr = r["median_s"], r["peer_median_s"], r["peer_ratio"], r["cpu_time_ratio"]
            if t is None:
                print("%11s" % r["status"])
                continue
            print("%11.1f %9.1f %7.1f%% %11s %6s %9s %9s" % (
                1e6 * t, r["gflops"], 100 * (r["ratio"] or 0), "%.1f" % (1e6 * p) if p else "-",
                r["peer_compute"] or "-", "%.2fx" % pr if pr else "-",
                "%.2fx" % cr if cr else "-"))
        demo, layer = s["demo_step_ms"], s["layer_step_ms"]
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
