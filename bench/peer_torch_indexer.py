#!/usr/bin/env python3
"""The PyTorch peer of `mla bench indexer`.

The DSA indexer's decode-time search on the shapes of `mla bench indexer`
(64 heads, head_dim 128, fp8 e4m3fn cache in blocks of 64 behind a shuffled
block table, one query token a sequence, every context C long, top-k 2048),
written the way a PyTorch model writes it (eager mode, no custom kernels):
the pages gathered through the block table (as bytes: not every torch
indexes float8 tensors), fp8 keys and q to bf16, q . k by einsum (bf16 in,
bf16 out), relu in fp32, the head weights by einsum, the key scales, then
torch.topk of each row and a sort of its indices (the library returns them
in index order). Same byte and FLOP counts and the same roofline rule as the
C bench, against this job's own ceilings (peer_torch.measure_ceilings).

  python3 bench/peer_torch_indexer.py [--device cuda|cpu] [--contexts L] [--batch L]
                                      [--json FILE]
  python3 bench/peer_torch_indexer.py --compare OURS.json PEER.json

--compare prints `mla bench indexer --json` (its planned search) and this
peer side by side. Timing as bench/peer_torch.py: CUDA events around a batch
of calls, the median of the samples after warm-up, inputs rotating among
sets so that the cache comes from memory rather than L2.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_torch as pt  # noqa: E402

HI, D, BLOCK, TOPK, KEY_BYTES = 64, 128, 64, 2048, 132


def make_search(torch, dev, B, C, nsets, gen):
    """(fn, read, how): fn(i) runs the search on input set i; read(i) sums
    the set's keys as float32 words (128 of the 132 bytes a key; one
    reduction, no scales, so no second launch): a bare read of what the
    search reads (read_seconds times it). (None, None, why) when this torch
    cannot."""
    f8 = getattr(torch, "float8_e4m3fn", None)
    if f8 is None:
        return None, None, "this torch has no float8_e4m3fn"
    bf = torch.bfloat16
    nb = pt.cdiv(C, BLOCK)
    sets = []
    for _ in range(nsets):
        n = B * nb
        # finite e4m3fn codes: 0x7F and 0xFF are its NaNs
        pages = torch.randint(0, 256, (n, BLOCK, D), dtype=torch.uint8, device=dev,
                              generator=gen)
        pages[(pages & 0x7F) == 0x7F] ^= 1
        q = torch.randint(0, 256, (B, HI, D), dtype=torch.uint8, device=dev, generator=gen)
        q[(q & 0x7F) == 0x7F] ^= 1
        sets.append(dict(
            pages=pages,
            scales=torch.rand(n, BLOCK, device=dev, generator=gen) / 128 + 1 / 256,
            bt=torch.randperm(n, device=dev, generator=gen).reshape(B, nb),
            q=q.view(f8).to(bf),
            w=torch.rand(B, HI, device=dev, generator=gen) * 2 - 1))

    def fn(i):
        st = sets[i]
        bt = st["bt"]
        k = st["pages"][bt].view(f8).to(bf).reshape(B, nb * BLOCK, D)[:, :C]
        s = torch.relu(torch.einsum("bhd,bnd->bhn", st["q"], k).float())
        logits = torch.einsum("bhn,bh->bn", s, st["w"]) * st["scales"][bt].reshape(B, -1)[:, :C]
        return torch.topk(logits, min(TOPK, C), dim=-1).indices.sort(dim=-1).values

    def read(i):
        st = sets[i]
        return st["pages"].view(torch.float32).sum()

    return fn, read, ("gather pages[block_table] as bytes, fp8 .to(bf16), einsum q.k in bf16, "
                      "relu and head weights in fp32, * key scale, torch.topk, sort of the indices")


def read_seconds(torch, timer, read, nsets, warm, reps, max_call_s, cuda):
    """Seconds per read(i): the practical floor of any kernel that reads
    those bytes at this size, where the roofline's copy rate is a large
    copy's. On a GPU, 32 reads (the sets in turn) replayed as one CUDA
    graph, so that Python's dispatch (~10 us a call) is not what is timed:
    each read costs its kernel and the graph's launch gap."""
    if not cuda:
        got = pt.sample(timer, read, nsets, warm, reps, max_call_s, cuda)
        return pt.median(got["ts"]) if "ts" in got else None
    n = 32
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # capture wants its warm-up off the default stream
        for i in range(min(n, nsets)):
            read(i)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(n):
            read(i % nsets)
    for _ in range(warm):
        g.replay()
    return pt.median([timer.batch(g.replay, 1) / n for _ in range(reps)])


def run(args):
    e = pt.sweep_env(args, "peer_torch_indexer")
    torch, dev, cuda, timer, ceil, gen = e.torch, e.dev, e.cuda, e.timer, e.ceil, e.gen
    reps, warm, rotate, devname = e.reps, e.warm, e.rotate, e.devname
    bw = ceil.get("copy_gbs", 0.0) * 1e9
    mm = ceil.get("matmul_gflops", 0.0) * 1e9
    rows, start = [], time.time()
    for C in [int(x) for x in args.contexts.split(",")]:
        for B in [int(x) for x in args.batch.split(",")]:
            cache_bytes = B * C * KEY_BYTES
            flops = 2.0 * HI * D * C * B
            t_bw = cache_bytes / bw if bw else 0.0
            t_mm = flops / mm if mm else 0.0
            r = dict(context=C, batch=B, heads=HI, head_dim=D, block_size=BLOCK, topk=TOPK,
                     status="ok", note="", median_s=None, min_s=None, reps=0,
                     cache_bytes=cache_bytes, flops=flops, roofline_s=max(t_bw, t_mm),
                     bound="copy" if t_bw >= t_mm else "matmul", ratio=None, how="",
                     read_s=None)
            rows.append(r)
            nsets = max(1, min(32, pt.cdiv(rotate, cache_bytes)))
            try:
                fn, read, how = make_search(torch, dev, B, C, nsets, gen)
                r["how"] = how
                if fn is None:
                    r["status"], r["note"] = "unsupported", "unsupported: " + how
                    continue
                got = pt.sample(timer, fn, nsets, warm, reps, args.max_call_s, cuda)
                if "skipped" in got:
                    r["status"], r["note"] = "skipped", "skipped: %.2f s per call" % got["skipped"]
                    continue
                ts = got["ts"]
                t = pt.median(ts)
                r.update(median_s=t, min_s=min(ts), reps=len(ts), input_sets=nsets,
                         ratio=(r["roofline_s"] / t) if r["roofline_s"] else None)
                r["read_s"] = read_seconds(torch, timer, read, nsets, warm, reps, args.max_call_s,
                                           cuda)
            except Exception as e:  # report, never stop the sweep
                r["status"], r["note"] = "error", "error: %s: %s" % (
                    type(e).__name__, str(e).split("\n")[0][:160])
            finally:
                if cuda:
                    torch.cuda.empty_cache()
            print("  C=%-6d B=%-3d %s" % (C, B, ("%.1f us" % (1e6 * r["median_s"]))
                                         if r["status"] == "ok" else r["note"]), file=sys.stderr)
    pt.print_ceilings(ceil)
    print()
    print("%7s %3s %9s %6s %9s %9s %11s %11s %5s %8s" % (
        "context", "B", "cache_MiB", "bound", "roof_us", "read_us", "median_us", "min_us", "reps",
        "roof%"))
    for r in rows:
        print("%7d %3d %9.1f %6s %9.1f %9s " % (
            r["context"], r["batch"], r["cache_bytes"] / pt.MIB, r["bound"], 1e6 * r["roofline_s"],
            "%9.1f" % (1e6 * r["read_s"]) if r.get("read_s") else "-"), end="")
        if r["status"] != "ok":
            print(r["note"])
            continue
        print("%11.1f %11.1f %5d %s" % (
            1e6 * r["median_s"], 1e6 * r["min_s"], r["reps"],
            ("%7.1f%%" % (100 * r["ratio"])) if r["ratio"] is not None else "     n/a"))
    print("\nsweep: %.1f s; torch eager peer of mla bench indexer (search = logits + top-k); "
          "read_us = a torch sum over the same keys' bytes (on a GPU, in a CUDA graph); median "
          "of the reps after warm-up" % (time.time() - start))
    return pt.finish(args.json, rows, bench="peer_torch_indexer", torch=torch.__version__,
                     device=devname, ceilings=ceil)


def compare(ours_path, peer_path):
    ours, peer = json.load(open(ours_path)), json.load(open(peer_path))
    pr = {(r["context"], r["batch"]): r for r in peer["rows"]}
    pt.compare_head("indexer search side by side", ours, peer)
    print("%7s %3s %12s %12s %9s %8s %8s %9s %10s" % (
        "context", "B", "ours_us", "peer_us", "peer/ours", "ours%", "peer%", "read_us",
        "read/ours"))
    for r in ours["rows"]:
        p = pr.get((r["context"], r["batch"]))
        o_t = r.get("search_median_s") if r["status"] == "ok" else None
        p_t = p["median_s"] if p is not None and p["status"] == "ok" else None
        ou = "%12.1f" % (1e6 * o_t) if o_t else "%12s" % r["status"]
        pu = "%12.1f" % (1e6 * p_t) if p_t else "%12s" % (p["status"] if p else "-")
        sp = "%9.2f" % (p_t / o_t) if o_t and p_t else "%9s" % "-"
        orat = "%7.1f%%" % (100 * r["search_roofline_fraction"]) if o_t else "%8s" % "-"
        prat = "%7.1f%%" % (100 * p["ratio"]) if p_t and p.get("ratio") else "%8s" % "-"
        rd = p.get("read_s") if p is not None else None
        ru = "%9.1f" % (1e6 * rd) if rd else "%9s" % "-"
        rr = "%9.1f%%" % (100 * rd / o_t) if rd and o_t else "%10s" % "-"
        print("%7d %3d %s %s %s %s %s %s %s" % (r["context"], r["batch"], ou, pu, sp, orat, prat,
                                                ru, rr))
    print("peer/ours > 1: the library is faster. ours = the planned search (logits + top-k); "
          "ratios to each side's own ceilings. read_us: the peer's torch sum over the same keys' "
          "bytes (a bare read at this size; on a GPU, replayed in a CUDA graph); read/ours: that "
          "over ours.")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    pt.add_common_args(ap)
    ap.add_argument("--contexts", default="4096,32768,131072")
    ap.add_argument("--batch", default="1,16,64")
    ap.add_argument("--compare", nargs=2, metavar=("OURS_JSON", "PEER_JSON"))
    args = ap.parse_args()
    if args.compare:
        compare(*args.compare)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
