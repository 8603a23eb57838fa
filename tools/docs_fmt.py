"""The cells of tools/docs_gen.py's tables: times, ratios, markdown rows, and the mark of a
host row that another process preempted. Shared by docs_gen.py and docs_peer.py."""
import math
import time


def utc(t):
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t))


def us(s):
    if s is None or not math.isfinite(s):
        return "-"
    v = s * 1e6
    return f"{v:.1f}" if v < 10000 else f"{v:.0f}"


def pct(f):
    if f is None or not math.isfinite(f):
        return "-"
    return f"{100 * f:.1f}%" if f >= 0.001 else f"{100 * f:.2f}%"


def num(v, digits=2):
    if v is None or not math.isfinite(v):
        return "-"
    return f"{v:.{digits}f}"


def table(head, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return lines


def ok(r):
    return r.get("status") == "ok"


def time_cell(run, r, t):
    """A median, marked `!` when preempted and `(r)` when the row has its own source."""
    cell = us(t)
    if preempted(run, r, t):
        cell += " !"
    if r.get("source"):
        cell += " (r)"
    return cell


def host_run(run):
    return run.get("backend") in ("cpu", "reference")


def preempted(run, r, t):
    """A host row whose process had under 80% of one thread's CPU time (bench_prepare.c's
    mark), or whose median is more than twice its minimum: samples another process cut into."""
    if not host_run(run) or not ok(r):
        return False
    u = r.get("cpu_util")
    if u is not None and 0 <= u < 0.8 / max(run.get("cpu_count") or 1, 1):
        return True
    lo = r.get("min_s", r.get("search_min_s"))
    return bool(lo and t and t > 2 * lo)
