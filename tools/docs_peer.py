"""The tables of tools/docs_gen.py that judge the library against a peer and a floor:

- prefill (`mla bench prefill`, recorded with `--peer` the JSON of `bench/peer_torch.py
  --prefill`): per shape both forms' times and shares of the matmul ceiling, the plan's
  choice against the faster form, torch SDPA's time on the expanded problem, and the floor;
- CPU peers (`record --cpu-run DIR`, DIR the output of `bash bench/run_cpu.sh`): per
  instruction set the decode rows against PyTorch-CPU with the 3x floor, and `mla demo`'s
  step against PyTorch's layer step, medians over the rounds as bench/cpu_table.py takes them.

The floors and the plan's slack are the rules of issue 21, written once here.
"""
import math
import os
import re
import sys
from pathlib import Path

from docs_fmt import host_run, num, ok, pct, table, time_cell, us, utc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import cpu_table  # noqa: E402  (bench/cpu_table.py: the medians over run_cpu.sh's rounds)

PREFILL_FORMS = ("absorbed", "expanded")
PLAN_SLACK = 1.10  # the plan's choice may be at most 10% slower than the faster form
PREFILL_FLOOR = {"tokens": 4096, "heads": 128, "of_matmul": 0.55, "vs_sdpa": 0.9}
CPU_DECODE_FLOOR = 3.0  # PyTorch-CPU time / ours, every decode row


# ------------------------------------------------------------------ prefill


def speedup(v):
    """A ratio a floor judges, to 2 digits rounded down: never shown at the floor from below."""
    return "-" if v is None else f"{math.floor(v * 100) / 100:.2f}"


def prefill_key(r):
    return (r["batch"], r["tokens"], r["heads"])


def of_matmul(run, r):
    """The row's own FLOPs per second over the run's matmul ceiling, or None."""
    mm = (run.get("ceilings", {}).get("matmul_gflops") or 0.0) * 1e9
    t = r.get("median_s") if r and ok(r) else None
    return r["flops"] / t / mm if t and mm else None


def plan_cell(shape):
    """Whether the plan's choice is within PLAN_SLACK of the faster form."""
    t = {f: r["median_s"] for f, r in shape.items() if ok(r)}
    plan = next((r.get("plan_form") for r in shape.values() if r.get("plan_form")), None)
    if plan not in t or len(t) < len(PREFILL_FORMS):
        return "-"
    fast = min(t, key=t.get)
    slow = t[plan] / t[fast]
    return "yes" if slow <= PLAN_SLACK else f"no: {num(slow)}x the {fast} form's time"


def floor_cell(run, shape):
    """met / unmet at the floor's shape, blank elsewhere."""
    f = PREFILL_FLOOR
    e = shape.get("expanded")
    if host_run(run) or not e or (e["tokens"], e["heads"]) != (f["tokens"], f["heads"]):
        return ""
    if not ok(e):
        return f"unmet: expanded {e.get('status')}"
    frac, peer = of_matmul(run, e), e.get("peer_median_s")
    short = []
    if frac is None or frac < f["of_matmul"]:
        shown = "-" if frac is None else f"{math.floor(frac * 1000) / 10:.1f}%"  # rounded down
        short.append(f"{shown} of matmul < {pct(f['of_matmul'])}")
    if not peer:
        short.append(f"no SDPA time ({e['peer_status']})" if e.get("peer_status") else
                     "no SDPA time")
    elif peer / e["median_s"] < f["vs_sdpa"]:
        short.append(f"{speedup(peer / e['median_s'])}x SDPA < {num(f['vs_sdpa'], 1)}x")
    return "met" if not short else "unmet: " + ", ".join(short)


def prefill_rows(run):
    """(head, rows, points, bars) of a prefill run: one table row per shape."""
    shapes = {}
    for r in run["rows"]:
        shapes.setdefault(prefill_key(r), {})[r["form"]] = r
    rows, pts, bars = [], [], []
    for (B, T, H), shape in shapes.items():
        cells = [T, B, H]
        for f in PREFILL_FORMS:
            r = shape.get(f)
            if r and ok(r):
                t = r["median_s"]
                cells += [time_cell(run, r, t), pct(of_matmul(run, r))]
                pts.append((f"{H} heads, {f}", T, r["flops"], r["bytes"], t))
                bars.append((f"B={B} T={T} H={H} {f}", of_matmul(run, r) or 0.0, "matmul"))
            else:
                cells += [(r.get("note") or r.get("status")) if r else "-", ""]
        plan = next((r.get("plan_form") for r in shape.values() if r.get("plan_form")), "-")
        e = shape.get("expanded") or {}
        peer = e.get("peer_median_s")
        cells += [plan, plan_cell(shape), us(peer) if peer else e.get("peer_status", "-"),
                  speedup(peer / e["median_s"]) if peer and ok(e) else "-",
                  floor_cell(run, shape)]
        rows.append(cells)
    head = ["T", "batch", "heads", "absorbed us", "absorbed of matmul", "expanded us",
            "expanded of matmul", "plan's choice", f"within {round(100 * (PLAN_SLACK - 1))}%",
            "SDPA us", "SDPA / expanded", "floor"]
    return head, rows, pts, bars


def prefill_notes(run):
    """The header lines a prefill table adds to the run's: the peer and the floor's verdict."""
    f = PREFILL_FLOOR
    lines = []
    peer = run.get("peer")
    if peer:
        lines.append(f"- **Peer**: torch {peer.get('torch', '?')} on {peer.get('device', '?')}: "
                     f"{peer.get('how') or 'scaled_dot_product_attention'}.")
    if host_run(run):
        lines.append("- **Floor**: none; issue 21's prefill floor is the H200's.")
        return lines
    cells = [r[-1] for r in prefill_rows(run)[1] if r[-1]]
    verdict = ("not measured in this run" if not cells else
               "met" if all(c == "met" for c in cells) else "unmet")
    lines.append(f"- **Floor** (T = {f['tokens']}, {f['heads']} heads: the expanded form at "
                 f">= {pct(f['of_matmul'])} of the matmul ceiling and >= "
                 f"{num(f['vs_sdpa'], 1)}x SDPA's speed): {verdict}.")
    return lines


def prefill_peer_meta(peer):
    """What a prefill run keeps of its peer's JSON beside the per-row times."""
    hows = sorted({r.get("how") for r in peer.get("rows", []) if r.get("how")})
    return {"torch": peer.get("torch"), "device": peer.get("device"), "how": "; ".join(hows)}


# ------------------------------------------------------------------ CPU peers (run_cpu.sh)


def machine_txt(path):
    """bench/run_cpu.sh's machine.txt: CPU model, logical CPUs, ISA flags, commit, torch."""
    try:
        lines = [ln.strip() for ln in Path(path).read_text().splitlines()]
    except OSError:
        return {}
    out = {}
    for ln in lines:
        if ln.startswith("model name"):
            out["cpu_model"] = ln.split(":", 1)[1].strip()
        elif ln.isdigit():
            out["cpu_count"] = int(ln)
        elif re.fullmatch(r"[0-9a-f]{40}", ln):
            out["commit"] = ln
        elif ln.startswith("torch "):
            out["torch"] = ln.split(None, 1)[1]
        elif ln and all(re.fullmatch(r"[a-z0-9_]+", w) for w in ln.split()):
            out["flags"] = ln
    return out


def cpu_run(folder):
    """The stored form of a run_cpu.sh output folder: cpu_table's medians per ISA, the
    machine, and the run's time (the newest of its decode JSONs)."""
    m = cpu_table.medians(str(folder))
    if not m["isas"]:
        sys.exit(f"docs_gen record: {folder} has no rN/decode_ISA.json (bench/run_cpu.sh)")
    runs = [cpu_table.load(p) or {} for p in sorted(Path(folder).glob("r*/decode_*.json"))]
    mtxt = Path(folder) / "machine.txt"  # written at the start: only without a decode time
    stamp = max([d.get("unix_time") or 0 for d in runs]) or (
        int(os.path.getmtime(mtxt)) if mtxt.exists() else 0)
    return {"bench": "cpu_peer", "unix_time": stamp, "rounds": m["rounds"],
            "machine": machine_txt(Path(folder) / "machine.txt"), "isas": m["isas"]}


def cpu_floor_cell(r):
    p = r.get("peer_ratio")
    if p is None:
        return "no PyTorch time"
    return "met" if p >= CPU_DECODE_FLOOR else "unmet"


def cpu_peer_lines(run):
    """The markdown of a stored run_cpu.sh run."""
    mc = run.get("machine", {})
    out = ["#### CPU decode and layer step vs PyTorch-CPU (`bash bench/run_cpu.sh`)", ""]
    parts = [f"{run['rounds']} round(s) ending {utc(run['unix_time'])}",
             f"{mc.get('cpu_model', '?')}, {mc.get('cpu_count', '?')} logical CPUs"]
    if mc.get("flags"):
        parts.append(f"flags {mc['flags']}")
    if mc.get("commit"):
        parts.append(f"commit {mc['commit'][:12]}")
    parts.append(f"torch {mc.get('torch', '?')}")
    out.append("- **Run**: " + "; ".join(parts) + ".")
    src = run.get("recorded", {}).get("source")
    if src:
        out.append(f"- **Source**: {src}.")
    out.append(f"- **Floor**: PyTorch-CPU / ours >= {num(CPU_DECODE_FLOOR, 0)} on every decode "
               "row (the median over the rounds of each round's ratio).")
    out += [f"- **Data**: `{run['_file']}`.", ""]
    for isa, s in run["isas"].items():
        out += [f"**{isa}** ({s.get('device', '?')}; medians of the runs' ceilings: copy "
                f"{num(s.get('copy_gbs'), 1)} GB/s, matmul {num(s.get('matmul_gflops'), 1)} "
                f"GFLOP/s, {s.get('matmul_how', '?')}):", ""]
        sparse = any(r.get("topk") for r in s["rows"])
        rows = []
        for r in s["rows"]:
            key = [r["batch"], r["context"], r["heads"], r["cache"]]
            if sparse:
                key.append(r.get("topk") or "-")
            if r.get("median_s") is None:
                rows.append(key + [r.get("status", "-")] + [""] * 7)
                continue
            pr, cr = r.get("peer_ratio"), r.get("cpu_time_ratio")
            rows.append(key + [us(r["median_s"]), num(r.get("gflops"), 1), pct(r.get("ratio")),
                               us(r.get("peer_median_s")), r.get("peer_compute") or "-",
                               speedup(pr), num(cr) if cr else "-",
                               cpu_floor_cell(r)])
        head = ["batch", "context", "heads", "cache"] + (["top-k"] if sparse else []) + [
            "ours us", "GFLOP/s", "of roofline", "PyTorch us", "PyTorch dtype", "PyTorch / ours",
            "CPU time PyTorch / ours", f"floor ({num(CPU_DECODE_FLOOR, 0)}x)"]
        out += table(head, rows) + [""]
        demo, layer = s.get("demo_step_ms"), s.get("layer_step_ms")
        out += ["`mla demo --backend cpu` (DeepSeek-V2-Lite, batch 1) median decode step "
                f"{num(demo, 3)} ms; PyTorch's layer step (`peer_torch.py --layer`) "
                f"{num(layer, 3)} ms; PyTorch / ours "
                f"{num(layer / demo) if demo and layer else '-'}.", ""]
    return out
