#!/usr/bin/env python3
"""The PyTorch peer of `mla bench prepare`.

The same prepare-path ops on the same shapes, written the way a PyTorch
model writes them (eager mode, no custom kernels): linear via F.linear
(torch.matmul), the W_kc absorb via torch.bmm, RMSNorm in fp32 math, RoPE
(GPT-J interleaved pairs) from cos/sin tables gathered by position, the
latent cache write via index_copy_, and the whole prepare composed from
them (q_a and kv_a as one GEMM on the concatenated weight, as SGLang does).

It prints the same table as `mla bench prepare` (same rows, same byte and
FLOP counts, same ratio rules) with its own ceilings measured in the same
job: a large device-to-device copy (read + write counted) and a large bf16
matmul. So on the GPU machine the ceilings, the peer and our bench all come
from one job (bench/run_gpu.sh).

  python3 bench/peer_torch.py [--device cuda|cpu] [--tokens 1,16,128,1024]
                              [--reps N] [--ops LIST] [--json FILE]
  python3 bench/peer_torch.py --compare OURS.json PEER.json
  python3 bench/peer_torch.py --decode [--quick] [--batch L] [--contexts L] [--heads L]
                              [--peer-dtype bf16|f32|best]
  python3 bench/peer_torch.py --prefill [--quick] [--tokens L] [--batch L] [--heads L]
  python3 bench/peer_torch.py --layer [--config NAME] [--batch B] [--contexts C]

--decode times plain-PyTorch paged MLA decode on the shapes of `mla bench
decode` (page gather through the block table, keys dequantized to the compute
dtype, bmm scores, softmax, bmm output, logsumexp), same byte and FLOP
counts; on a CPU each row is timed in bf16 and in f32 (the way a fallback
without bf16 matmul units runs it) and the faster is reported (--peer-dtype).
--prefill times torch's scaled_dot_product_attention (causal) on the expanded
problem of `mla bench prefill` (q, k 192-dim, v 128-dim, same T and heads); a
torch without it (before 2.0, e.g. Debian 12's 1.13) runs the plain form:
bf16 q k^T, fp32 masked softmax, bf16 P v.
--layer times one decode step of an MLA layer in plain torch, next to `mla demo`.

--compare prints the two JSON files side by side (ours / peer time).
Timing: CUDA events around a batch of calls, median of the samples after
warm-up; inputs rotate among several sets so that the weights come from
memory rather than L2 (as in the C bench). Needs torch; numpy is not used.
"""
import argparse
import json
import math
import os
import sys
import time
import types

CONFIGS = {
    # name: hidden, H, q_lora, L, nope, R, v, eps, max_pos, rope base, factor,
    #       beta_fast, beta_slow, original_max_pos, mscale, mscale_all_dim
    "DeepSeek-V3": dict(hidden=7168, H=128, q_lora=1536, L=512, nope=128, R=64, v=128,
                        eps=1e-6, max_pos=163840, base=10000.0, factor=40.0, beta_fast=32.0,
                        beta_slow=1.0, orig=4096, mscale=1.0, mscale_all_dim=1.0),
    "DeepSeek-V3.2": dict(hidden=7168, H=128, q_lora=1536, L=512, nope=128, R=64, v=128,
                          eps=1e-6, max_pos=163840, base=10000.0, factor=40.0, beta_fast=32.0,
                          beta_slow=1.0, orig=4096, mscale=1.0, mscale_all_dim=1.0),
    "DeepSeek-V2-Lite": dict(hidden=2048, H=16, q_lora=0, L=512, nope=128, R=64, v=128,
                             eps=1e-6, max_pos=163840, base=10000.0, factor=40.0, beta_fast=32.0,
                             beta_slow=1.0, orig=4096, mscale=0.707, mscale_all_dim=0.707),
    "Kimi-K2": dict(hidden=7168, H=64, q_lora=1536, L=512, nope=128, R=64, v=128, eps=1e-6,
                    max_pos=131072, base=50000.0, factor=32.0, beta_fast=1.0, beta_slow=1.0,
                    orig=4096, mscale=1.0, mscale_all_dim=1.0),
}

# (case, op, variant, is_gemm, is_whole): the C bench's rows, in its order
CASES = [
    ("q_a", "q_a_proj", "bf16", 1, 0),
    ("q_a_fp8", "q_a_proj", "fp8 block", 1, 0),
    ("kv_a", "kv_a_proj", "bf16", 1, 0),
    ("kv_a_fp8", "kv_a_proj", "fp8 block", 1, 0),
    ("q_b", "q_b_proj", "bf16", 1, 0),
    ("q_b_fp8", "q_b_proj", "fp8 block", 1, 0),
    ("absorb", "absorb", "bf16", 1, 0),
    ("qk_norm", "qk_rmsnorm", "bf16", 0, 0),
    ("rope_q", "rope_q", "bf16", 0, 0),
    ("rope_k", "rope_k", "bf16->f32", 0, 0),
    ("cache_bf16", "cache_write", "NORMAL bf16", 0, 0),
    ("cache_fp8", "cache_write", "NORMAL fp8", 0, 0),
    ("rope_cache", "rope_cache", "NORMAL bf16", 0, 0),
    ("prepare", "prepare", "bf16", 0, 1),
]

BLOCK_SIZE = 64
MIB = 1 << 20


def cdiv(a, b):
    return (a + b - 1) // b


def linear_shape(c, case):
    if case.startswith("q_a"):
        return c["q_lora"], c["hidden"]
    if case.startswith("kv_a"):
        return c["L"] + c["R"], c["hidden"]
    return c["H"] * (c["nope"] + c["R"]), c["q_lora"]


def counts(c, case, T):
    """Bytes (each input read once + each output written once), weight bytes,
    FLOPs: the formulas of bench/bench_prepare.c counts(), term for term."""
    Hd, H, Q, L, R, n = c["hidden"], c["H"], c["q_lora"], c["L"], c["R"], c["nope"]
    qk = n + R
    table = 2 * T * (R // 2) * 4
    if case in ("q_a", "q_a_fp8", "kv_a", "kv_a_fp8", "q_b", "q_b_fp8"):
        N, K = linear_shape(c, case)
        w = N * K + 4 * cdiv(N, 128) * cdiv(K, 128) if case.endswith("fp8") else 2 * N * K
        return 2 * T * K + w + 2 * T * N, w, 2.0 * T * N * K
    if case == "absorb":
        w = 2 * H * n * L
        return 2 * H * T * n + w + 2 * H * T * L, w, 2.0 * H * T * n * L
    if case == "qk_norm":
        w = 2 * (Q + L)
        return 2 * T * Q + 2 * T * L + w + 2 * T * Q + 2 * T * L, w, 4.0 * T * (Q + L)
    if case == "rope_q":
        return 2 * T * H * R + 8 * T + table + 2 * T * H * R, 0, 6.0 * T * H * (R // 2)
    if case == "rope_k":
        return 2 * T * R + 8 * T + table + 4 * T * R, 0, 6.0 * T * (R // 2)
    if case == "cache_bf16":
        return 2 * T * L + 2 * T * R + 8 * T + 2 * T * (L + R), 0, 0.0
    if case == "cache_fp8":
        return 2 * T * L + 2 * T * R + 8 * T + T * (L + R), 0, float(T * (L + R))
    if case == "rope_cache":
        b = (2 * T * H * L + 2 * T * H * R + 2 * T * L + 2 * T * R + 8 * T + 8 * T + table
             + 2 * T * H * (L + R) + 2 * T * (L + R))
        return b, 0, 6.0 * T * (H + 1) * (R // 2)
    if case == "prepare":
        w = 2 * Q * Hd + 2 * (L + R) * Hd + 2 * H * qk * Q + 2 * H * n * L
        b = (2 * T * Hd + w + 2 * (Q + L) + 8 * T + 8 * T + table + 2 * T * H * (L + R)
             + 2 * T * (L + R))
        f = (2.0 * T * Hd * (Q + L + R) + 2.0 * T * Q * (H * qk) + 2.0 * T * H * n * L
             + 4.0 * T * (Q + L) + 6.0 * T * (H + 1) * (R // 2))
        return b, w, f
    raise ValueError(case)


def shape_name(c, case):
    H, L, R, n = c["H"], c["L"], c["R"], c["nope"]
    if case in ("q_a", "q_a_fp8", "kv_a", "kv_a_fp8", "q_b", "q_b_fp8"):
        N, K = linear_shape(c, case)
        return "W [%d, %d]" % (N, K)
    return {"absorb": "W_kc [%d, %d, %d]" % (H, n, L),
            "qk_norm": "[T, %d] + [T, %d]" % (c["q_lora"], L),
            "rope_q": "q_pe [T, %d, %d]" % (H, R),
            "rope_k": "k_pe [T, %d]" % R,
            "cache_bf16": "rows [T, %d]" % (L + R),
            "cache_fp8": "rows [T, %d]" % (L + R),
            "rope_cache": "q_cat [T, %d, %d]" % (H, L + R),
            "prepare": c["name"]}[case]


def rope_tables(torch, c, dev):
    """cos, sin [max_pos, R/2] f32 with DeepSeek YaRN (MLA.md section 3), float64 math."""
    R, base, factor = c["R"], c["base"], c["factor"]
    i = torch.arange(R // 2, dtype=torch.float64)
    f = base ** (-2.0 * i / R)
    if factor > 1.0:
        def corr(r):
            return R * math.log(c["orig"] / (2 * math.pi * r)) / (2 * math.log(base))
        low = max(math.floor(corr(c["beta_fast"])), 0)
        high = min(math.ceil(corr(c["beta_slow"])), R - 1)
        if low == high:
            high += 0.001
        ramp = ((i - low) / (high - low)).clamp(0, 1)
        f = f / factor * ramp + f * (1 - ramp)

    def m(s, k):
        return 1.0 if s <= 1.0 else 0.1 * k * math.log(s) + 1.0
    ms = m(factor, c["mscale"]) / m(factor, c["mscale_all_dim"])
    ang = torch.arange(c["max_pos"], dtype=torch.float64)[:, None] * f[None, :]
    return ((ang.cos() * ms).float().to(dev), (ang.sin() * ms).float().to(dev))


class Timer:
    def __init__(self, torch, dev):
        self.torch, self.cuda = torch, dev.type == "cuda"

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def batch(self, fn, k):
        """Seconds per call over a batch of k calls (CUDA events on a GPU)."""
        if self.cuda:
            torch = self.torch
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(k):
                fn()
            e1.record()
            e1.synchronize()
            return e0.elapsed_time(e1) * 1e-3 / k
        t0 = time.perf_counter()
        for _ in range(k):
            fn()
        return (time.perf_counter() - t0) / k


def median(v):
    v = sorted(v)
    n = len(v)
    return 0.0 if n == 0 else (v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2]))


def sample(timer, fn, nsets, warm, reps, max_call_s, cuda, threads=None):
    """Seconds per call of fn(i), the input sets taken in turn: warm-up calls,
    then up to reps samples (about a second in all), each a batch of k calls
    worth ~0.5 ms of work on a GPU, ~20 us on a CPU. Returns dict(ts, k,
    cpu_util: the sampling's CPU time / (wall time * threads), when threads
    is given, cpu_s: the median of the process's CPU time per call), or
    dict(skipped=seconds of one call) past max_call_s."""
    it = [0]

    def call():
        fn(it[0] % nsets)
        it[0] += 1
    timer.sync()
    t_call = timer.batch(call, 1)
    for _ in range(warm - 1):
        t_call = timer.batch(call, 1)
    if t_call > max_call_s:
        return dict(skipped=t_call)
    k = max(1, min(64, math.ceil((5e-4 if cuda else 2e-5) / max(t_call, 1e-8))))
    n = max(1, min(reps, int(1.0 / max(t_call * k, 1e-9))))
    c0, w0 = time.process_time(), time.perf_counter()
    ts, cs = [], []
    for _ in range(n):
        c1 = time.process_time()
        ts.append(timer.batch(call, k))
        cs.append((time.process_time() - c1) / k)
    util = (time.process_time() - c0) / ((time.perf_counter() - w0) * threads) if threads else None
    return dict(ts=ts, k=k, cpu_util=util, cpu_s=median(cs))


def finish(path, rows, **fields):
    """Writes the sweep to path (when given) as JSON: the fields, then the
    rows. The exit status: 1 when a row failed with an error."""
    if path:
        with open(path, "w") as fh:
            json.dump(dict(fields, rows=rows), fh, indent=1)
    return 1 if any(r["status"] == "error" for r in rows) else 0


def sweep_env(args, what, extra=""):
    """What every sweep starts from: torch on the device asked for (the GPU
    when there is one), the reps, warm-ups and input rotation for it, the
    timer, the device's name, this job's ceilings (none with --no-ceilings)
    and the seeded generator. Prints the banner line: `what`, torch's version,
    the device, `extra` and the host's load average."""
    import torch
    dev = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cuda = dev.type == "cuda"
    if not cuda or args.threads:
        torch.set_num_threads(args.threads or os.cpu_count() or 1)
    timer = Timer(torch, dev)
    devname = torch.cuda.get_device_name(dev) if cuda else "host CPU (%d threads)" % (
        torch.get_num_threads())
    torch.backends.cuda.matmul.allow_tf32 = False
    if args.no_mkldnn:  # a CPU without AVX-512: torch's own bf16 GEMM instead of oneDNN's
        torch.backends.mkldnn.enabled = False
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else -1.0
    print("%s: torch %s on %s; %shost load average %.2f" % (what, torch.__version__, devname,
                                                           extra, load))
    sys.stdout.flush()
    ceil = {} if args.no_ceilings else measure_ceilings(torch, dev, timer, args)
    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed)
    return types.SimpleNamespace(
        torch=torch, dev=dev, cuda=cuda, timer=timer, devname=devname, ceil=ceil, gen=gen,
        reps=args.reps or (20 if cuda else 5), warm=args.warmup or (5 if cuda else 1),
        rotate=(args.rotate_mib or (256 if cuda else 128)) * MIB)


def print_ceilings(ceil):
    """The sweep's ceilings, as its table's header says them."""
    print("ceilings (measured in this job)")
    if ceil:
        print("  copy bandwidth : %8.1f GB/s    %s" % (ceil["copy_gbs"], ceil["copy_how"]))
        print("  matmul rate    : %8.1f GFLOP/s %s" % (ceil["matmul_gflops"], ceil["matmul_how"]))


def measure_ceilings(torch, dev, timer, args):
    out = {}
    cuda = dev.type == "cuda"
    nbytes = (args.copy_mib or (1024 if cuda else 256)) * MIB
    src = torch.randint(0, 255, (nbytes,), dtype=torch.uint8, device=dev)
    dst = torch.randint(0, 255, (nbytes,), dtype=torch.uint8, device=dev)
    k = 10 if cuda else 1
    for _ in range(2):
        dst.copy_(src)
    timer.sync()
    t = median([timer.batch(lambda: dst.copy_(src), k) for _ in range(7)])
    out["copy_gbs"] = 2.0 * nbytes / t / 1e9
    out["copy_how"] = "torch copy_ %s, 2 x %d MiB, read + write counted" % (dev.type, nbytes // MIB)
    del src, dst
    # matmul: bf16 on a GPU (tensor cores); bf16 and f32 on a CPU; the C bench's
    # shapes, and a big square on a GPU
    dts = [torch.bfloat16] if cuda else [torch.float32, torch.bfloat16]
    shapes = [(128, 7168, 1536), (1024, 7168, 1536)] + ([(8192, 8192, 8192)] if cuda else [])
    best, points = 0.0, []
    for dt in dts:
        for (M, N, K) in shapes:
            a = torch.randn(M, K, device=dev).to(dt)
            b = torch.randn(N, K, device=dev).to(dt)
            fn = lambda: torch.nn.functional.linear(a, b)  # noqa: E731
            for _ in range(3):
                fn()
            timer.sync()
            kk = 5 if cuda else 1
            t = median([timer.batch(fn, kk) for _ in range(5 if cuda else 3)])
            g = 2.0 * M * N * K / t / 1e9
            points.append(dict(M=M, N=N, K=K, dtype=str(dt).replace("torch.", ""), seconds=t,
                               gflops=g))
            best = max(best, g)
    out["matmul_gflops"] = best
    out["matmul_how"] = "torch F.linear %s on %s, best of %s" % (
        "/".join(str(d).replace("torch.", "") for d in dts), dev.type,
        ", ".join("%dx%dx%d" % s for s in shapes))
    out["matmul_points"] = points
    return out


def make_case(torch, dev, c, case, T, nsets, tabs, gen):
    """Returns (fn(i), note) running the case on input set i; None when the
    torch build cannot do it (no float8)."""
    F = torch.nn.functional
    bf = torch.bfloat16
    H, L, R, n, v, Q, Hd = c["H"], c["L"], c["R"], c["nope"], c["v"], c["q_lora"], c["hidden"]
    qk, D, eps = n + R, L + R, c["eps"]
    cos, sin = tabs
    has_fp8 = hasattr(torch, "float8_e4m3fn")

    def act(*shape):
        return (torch.randn(*shape, device=dev, generator=gen) * 0.5).to(bf)

    def weight(*shape):
        return (torch.randn(*shape, device=dev, generator=gen) * 0.02).to(bf)

    def normw(d):
        return (torch.rand(d, device=dev, generator=gen) + 0.5).to(bf)

    p0 = int(torch.randint(0, c["max_pos"] - T, (1,), generator=gen, device=dev).item()) \
        if c["max_pos"] > T else 0
    pos = (torch.arange(T, device=dev, dtype=torch.int64) + p0) % c["max_pos"]
    nb = 2 * cdiv(T, BLOCK_SIZE)
    perm = torch.randperm(nb, device=dev, generator=gen)
    t_idx = torch.arange(T, device=dev, dtype=torch.int64)
    slots = perm[t_idx // BLOCK_SIZE] * BLOCK_SIZE + t_idx % BLOCK_SIZE

    def rms(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(bf)

    def rope(x, p):
        """Interleaved pairs (x[2i], x[2i+1]); fp32 math; x [T, ..., R]."""
        cs, sn = cos[p], sin[p]
        shp = (x.shape[0],) + (1,) * (x.dim() - 2) + (R // 2,)
        cs, sn = cs.view(shp), sn.view(shp)
        xf = x.float().unflatten(-1, (R // 2, 2))
        a, b = xf[..., 0], xf[..., 1]
        return torch.stack((a * cs - b * sn, a * sn + b * cs), -1).flatten(-2)

    def fp8_block(N, K):
        """e4m3fn codes and [ceil(N/128), ceil(K/128)] f32 scales; the peer
        dequantizes to bf16 and runs the bf16 GEMM (plain PyTorch has no
        block-scaled fp8 GEMM)."""
        w = torch.randn(N, K, device=dev, generator=gen) * 8.0
        sc = torch.rand(cdiv(N, 128), cdiv(K, 128), device=dev, generator=gen) * 1e-3 + 1e-3
        return w.clamp(-448, 448).to(torch.float8_e4m3fn), sc

    def dequant(w8, sc, N, K):
        s = sc.repeat_interleave(128, 0)[:N].repeat_interleave(128, 1)[:, :K]
        return (w8.to(torch.float32) * s).to(bf)

    sets = []
    if case in ("q_a", "kv_a", "q_b", "q_a_fp8", "kv_a_fp8", "q_b_fp8"):
        N, K = linear_shape(c, case)
        fp8 = case.endswith("fp8")
        if fp8 and not has_fp8:
            return None, "this torch has no float8_e4m3fn"
        for _ in range(nsets):
            x = act(T, K)
            if fp8:
                w8, sc = fp8_block(N, K)
                sets.append((x, w8, sc))
            else:
                sets.append((x, weight(N, K)))
        if fp8:
            return (lambda i: F.linear(sets[i][0], dequant(sets[i][1], sets[i][2], N, K))), \
                "dequant to bf16 + F.linear"
        return (lambda i: F.linear(sets[i][0], sets[i][1])), "F.linear"
    if case == "absorb":
        for _ in range(nsets):
            q = act(T, H, qk)
            kvb = weight(H * (n + v), L)
            sets.append((q[:, :, :n].transpose(0, 1), kvb.view(H, n + v, L)[:, :n, :]))
        return (lambda i: torch.bmm(sets[i][0], sets[i][1])), "torch.bmm on strided views"
    if case == "qk_norm":
        for _ in range(nsets):
            sets.append((act(T, Q), act(T, D)[:, :L], normw(Q), normw(L)))

        def fn(i):
            q, kv, qw, kw = sets[i]
            return rms(q, qw), rms(kv, kw)
        return fn, "fp32 RMSNorm x2"
    if case == "rope_q":
        for _ in range(nsets):
            q = act(T, H, qk)
            qcat = act(T, H, D)
            sets.append((q[:, :, n:], qcat[:, :, L:]))

        def fn(i):
            x, y = sets[i]
            y.copy_(rope(x, pos))
        return fn, "gather cos/sin, fp32, copy into q_cat"
    if case == "rope_k":
        for _ in range(nsets):
            sets.append((act(T, D)[:, L:],))
        return (lambda i: rope(sets[i][0], pos)), "gather cos/sin, fp32 out"
    if case in ("cache_bf16", "cache_fp8"):
        fp8 = case == "cache_fp8"
        if fp8 and not has_fp8:
            return None, "this torch has no float8_e4m3fn"
        for _ in range(nsets):
            kv = act(T, D)
            cache = torch.empty(nb * BLOCK_SIZE, D, device=dev,
                                dtype=torch.uint8 if fp8 else bf)
            sets.append((kv[:, :L], kv[:, L:], cache))
        if fp8:
            def fn(i):
                kn, kp, cache = sets[i]
                rows = (torch.cat((kn, kp), -1).float() / 0.0625).clamp(-448, 448)
                cache.index_copy_(0, slots, rows.to(torch.float8_e4m3fn).view(torch.uint8))
            return fn, "cat, scale, to float8, index_copy_"

        def fn(i):
            kn, kp, cache = sets[i]
            cache.index_copy_(0, slots, torch.cat((kn, kp), -1))
        return fn, "cat + index_copy_"
    if case == "rope_cache":
        for _ in range(nsets):
            q = act(T, H, qk)
            kv = act(T, D)
            sets.append((act(T, H, L), q[:, :, n:], kv[:, :L], kv[:, L:],
                         torch.empty(T, H, D, device=dev, dtype=bf),
                         torch.empty(nb * BLOCK_SIZE, D, device=dev, dtype=bf)))

        def fn(i):
            qn, qp, kn, kp, qcat, cache = sets[i]
            qcat[:, :, :L].copy_(qn)
            qcat[:, :, L:].copy_(rope(qp, pos))
            cache.index_copy_(0, slots, torch.cat((kn, rope(kp, pos).to(bf)), -1))
        return fn, "copy, rope, cat + index_copy_"
    if case == "prepare":
        for _ in range(nsets):
            w_qkv_a = torch.cat((weight(Q, Hd), weight(D, Hd)), 0)  # fused q_a + kv_a
            kvb = weight(H * (n + v), L)
            sets.append((act(T, Hd), w_qkv_a, normw(Q), normw(L), weight(H * qk, Q),
                         kvb.view(H, n + v, L)[:, :n, :],
                         torch.empty(T, H, D, device=dev, dtype=bf),
                         torch.empty(nb * BLOCK_SIZE, D, device=dev, dtype=bf)))

        def fn(i):
            x, wqkv, qw, kw, wqb, wkc, qcat, cache = sets[i]
            lat = F.linear(x, wqkv)
            q_lat, kv_lat = lat[:, :Q], lat[:, Q:]
            q_lat = rms(q_lat, qw)
            k_nope = rms(kv_lat[:, :L], kw)
            q = F.linear(q_lat, wqb).view(T, H, qk)
            qcat[:, :, :L].copy_(torch.bmm(q[:, :, :n].transpose(0, 1), wkc).transpose(0, 1))
            qcat[:, :, L:].copy_(rope(q[:, :, n:], pos))
            cache.index_copy_(0, slots, torch.cat((k_nope, rope(kv_lat[:, L:], pos).to(bf)), -1))
        return fn, "eager composition (fused q_a+kv_a GEMM)"
    raise ValueError(case)


def judge(rows, ceil):
    bw = ceil.get("copy_gbs", 0.0) * 1e9
    mm = ceil.get("matmul_gflops", 0.0) * 1e9
    for r in rows:
        r["basis"], r["ratio"] = "", None
        if r["status"] != "ok" or not r["median_s"]:
            continue
        t = r["median_s"]
        r["gbs"] = r["bytes"] / t / 1e9
        r["gflops"] = r["flops"] / t / 1e9
        if r["is_whole"] or (r["is_gemm"] and 16 < r["T"] < 128):
            fl = max(r["bytes"] / bw if bw else 0.0, r["flops"] / mm if mm else 0.0)
            r["basis"], r["ratio"] = "roofline", (fl / t if fl else None)
        elif r["is_gemm"] and r["T"] >= 128:
            r["basis"], r["ratio"] = "matmul", (r["flops"] / t / mm if mm else None)
        elif r["is_gemm"]:
            r["basis"], r["ratio"] = "weight BW", (r["weight_bytes"] / t / bw if bw else None)
        else:
            r["basis"], r["ratio"] = "copy BW", (r["bytes"] / t / bw if bw else None)


def print_table(rows, out=sys.stdout):
    out.write("%-11s %-20s %-11s %5s %12s %12s %9s %9s %5s %5s  %s\n" % (
        "op", "shape", "variant", "T", "median_us", "min_us", "GB/s", "GFLOP/s", "reps", "cpu%",
        "vs ceiling"))
    prev = None
    for r in rows:
        if prev is not None and prev != r["op"]:
            out.write("\n")
        prev = r["op"]
        out.write("%-11s %-20s %-11s %5d " % (r["op"], r["shape"], r["variant"], r["T"]))
        if r["status"] != "ok":
            out.write("%s\n" % r["note"])
            continue
        out.write("%12.1f %12.1f %9.2f %9.1f %5d " % (
            1e6 * r["median_s"], 1e6 * r["min_s"], r["gbs"], r["gflops"], r["reps"]))
        cu = r.get("cpu_util")
        out.write("%4.0f%%  " % (100 * cu) if cu is not None else "    -  ")
        out.write(("%5.1f%% %s\n" % (100 * r["ratio"], r["basis"])) if r["ratio"] is not None
                  else ("  n/a %s\n" % r["basis"]))


def compare_head(title, ours, peer):
    """The first lines of a side-by-side table: who ran, and both sides' ceilings."""
    oc, pc = ours.get("ceilings", {}), peer.get("ceilings", {})
    print("%s: ours (%s, %s) vs PyTorch peer (%s)" % (
        title, ours.get("backend"), ours.get("device"), peer.get("device")))
    print("  copy ceiling  : ours %.1f GB/s, peer %.1f GB/s" % (
        oc.get("copy_gbs") or 0, pc.get("copy_gbs") or 0))
    print("  matmul ceiling: ours %.1f GFLOP/s (%s), peer %.1f GFLOP/s (%s)" % (
        oc.get("matmul_gflops") or 0, oc.get("matmul_source", ""),
        pc.get("matmul_gflops") or 0, pc.get("matmul_how", "")))


def compare(ours_path, peer_path):
    ours, peer = json.load(open(ours_path)), json.load(open(peer_path))
    if ours.get("bench") == "decode":
        return compare_decode(ours, peer)
    if ours.get("bench") == "prefill":
        return compare_prefill(ours, peer)
    pr = {(r["op"], r["variant"], r["T"]): r for r in peer["rows"]}
    compare_head("side by side", ours, peer)
    print("%-11s %-11s %5s %12s %12s %9s %8s %8s" % (
        "op", "variant", "T", "ours_us", "peer_us", "peer/ours", "ours%", "peer%"))
    for r in ours["rows"]:
        p = pr.get((r["op"], r["variant"], r["T"]))
        o_ok = r["status"] == "ok"
        p_ok = p is not None and p["status"] == "ok"
        ou = "%12.1f" % (1e6 * r["median_s"]) if o_ok else "%12s" % r["status"]
        pu = "%12.1f" % (1e6 * p["median_s"]) if p_ok else "%12s" % (p["status"] if p else "-")
        sp = "%9.2f" % (p["median_s"] / r["median_s"]) if o_ok and p_ok else "%9s" % "-"
        orat = "%7.1f%%" % (100 * r["ratio"]) if o_ok and r.get("ratio") is not None else "%8s" % "-"
        prat = "%7.1f%%" % (100 * p["ratio"]) if p_ok and p.get("ratio") is not None else "%8s" % "-"
        print("%-11s %-11s %5d %s %s %s %s %s" % (r["op"], r["variant"], r["T"], ou, pu, sp,
                                                  orat, prat))
    print("peer/ours > 1: the library is faster. Ratios to each side's own ceilings.")


# ---------------------------------------------------------------- decode

DECODE_L, DECODE_R, DECODE_BLOCK = 512, 64, 64
# bytes per cached token: bf16 NORMAL, fp8 NORMAL, FP8_SCALED (as `mla bench decode`)
DECODE_TOKEN_BYTES = {"bf16": 1152, "fp8": 576, "fp8_scaled": 656}
DECODE_CACHES = ["bf16", "fp8", "fp8_scaled"]


def decode_cases(args):
    """The rows of `mla bench decode`, in its order (ascending FLOPs)."""
    lists = [args.batch, args.contexts, args.heads]
    if any(lists):
        bs = [int(x) for x in (args.batch or "128").split(",")]
        cs = [int(x) for x in (args.contexts or "4096").split(",")]
        hs = [int(x) for x in (args.heads or "16").split(",")]
        rows = [(b, c, h, k) for c in cs for b in bs for h in hs for k in DECODE_CACHES]
    elif args.quick:
        rows = [(b, 1024, 16, k) for k in DECODE_CACHES for b in (1, 4)]
    else:
        rows = [(b, c, 16, "bf16") for b in (1, 4) for c in (1024, 4096, 8192)]
        rows += [(128, 4096, h, k) for h in (16, 128) for k in DECODE_CACHES]
    rows.sort(key=lambda r: (r[0] * r[1] * r[2], DECODE_CACHES.index(r[3])))
    return rows


def decode_scale():
    """mla_softmax_scale of the DeepSeek-V3 preset: (nope + R)^-0.5 * m^2, YaRN m."""
    c = CONFIGS["DeepSeek-V3"]
    m = 0.1 * c["mscale_all_dim"] * math.log(c["factor"]) + 1.0
    return (c["nope"] + c["R"]) ** -0.5 * m * m


def make_decode(torch, dev, B, C, H, cache, nsets, gen, compute="bf16"):
    """fn(i) running plain-PyTorch paged MLA decode on input set i, or None
    (this torch has no float8): pages gathered through the block table, keys
    dequantized to the compute dtype (bf16, or f32 the way a CPU fallback
    without bf16 matmul units would run it), scores by bmm, softmax, output
    by bmm over the first L dims, lse by logsumexp, o as bf16."""
    bf = torch.bfloat16
    cd = torch.float32 if compute == "f32" else bf
    L, R, bs = DECODE_L, DECODE_R, DECODE_BLOCK
    D = L + R
    f8 = getattr(torch, "float8_e4m3fn", None)
    if cache != "bf16" and f8 is None:
        return None, "this torch has no float8_e4m3fn"
    nb = cdiv(C, bs)
    scale = decode_scale()
    sets = []
    for _ in range(nsets):
        N = B * nb
        k = torch.rand(N, bs, D, device=dev, generator=gen) * 4 - 2
        st = {}
        if cache == "bf16":
            st["pages"] = k.to(bf)
        elif cache == "fp8":
            st["k_scale"] = 1.0 / 64
            st["pages"] = (k / st["k_scale"]).to(f8)
        else:
            nope = k[..., :L].reshape(N, bs, L // 128, 128)
            sc = (nope.abs().amax(-1) / 448.0).clamp(min=1e-4)
            sc = torch.exp2(torch.ceil(torch.log2(sc)))
            st["nope"] = (nope / sc[..., None]).to(f8).reshape(N, bs, L)
            st["scales"] = sc.float()
            st["rope"] = k[..., L:].to(bf)
        del k
        st["bt"] = torch.randperm(N, device=dev, generator=gen).reshape(B, nb)
        st["q"] = (torch.rand(B, H, D, device=dev, generator=gen) * 2 - 1).to(bf)
        sets.append(st)

    def fn(i):
        st = sets[i]
        bt = st["bt"]
        if cache == "bf16":
            k = st["pages"][bt].to(cd)
        elif cache == "fp8":  # gathered as bytes: not every torch indexes float8 tensors
            k = st["pages"].view(torch.uint8)[bt].view(f8).to(cd) * st["k_scale"]
        else:
            nope = st["nope"].view(torch.uint8)[bt].view(f8).to(cd)
            nope = nope.reshape(B, nb, bs, L // 128, 128)
            nope = (nope * st["scales"][bt][..., None].to(cd)).reshape(B, nb, bs, L)
            k = torch.cat([nope, st["rope"][bt].to(cd)], -1)
        k = k.reshape(B, nb * bs, D)[:, :C]
        s = torch.bmm(st["q"].to(cd), k.transpose(1, 2)) * scale
        lse = torch.logsumexp(s.float(), -1)
        p = torch.softmax(s, -1)
        o = torch.bmm(p, k[..., :L]).to(bf)
        return o, lse

    how = "gather pages[block_table], %s, bmm + softmax + bmm in %s" % (
        {"bf16": "bf16 pages", "fp8": "fp8 pages .to(%s) * k_scale" % compute,
         "fp8_scaled": "fp8 nope .to(%s) * group scales, cat rope" % compute}[cache], compute)
    return fn, how


def decode_main(args):
    e = sweep_env(args, "peer_torch decode")
    torch, dev, cuda, timer, ceil, gen = e.torch, e.dev, e.cuda, e.timer, e.ceil, e.gen
    reps, warm, rotate, devname = e.reps, e.warm, e.rotate, e.devname
    bw = ceil.get("copy_gbs", 0.0) * 1e9
    mm = ceil.get("matmul_gflops", 0.0) * 1e9
    computes = ["bf16", "f32"] if args.peer_dtype == "best" else [args.peer_dtype]
    if args.peer_dtype == "best" and cuda:
        computes = ["bf16"]  # tensor cores: f32 is never the faster there
    rows, start = [], time.time()
    for (B, C, H, cache) in decode_cases(args):
        L, R = DECODE_L, DECODE_R
        cache_bytes = B * C * DECODE_TOKEN_BYTES[cache]
        nbytes = cache_bytes + B * H * (L + R) * 2 + B * H * L * 2
        flops = 2.0 * B * H * C * (L + R + L)
        t_bw = nbytes / bw if bw else 0.0
        t_mm = flops / mm if mm else 0.0
        r = dict(op="decode", batch=B, context=C, heads=H, cache=cache, s_q=1,
                 block_size=DECODE_BLOCK, q_dtype="bf16", out_dtype="bf16", status="ok", note="",
                 median_s=None, min_s=None, reps=0, bytes=nbytes, cache_bytes=cache_bytes,
                 flops=flops, roofline_s=max(t_bw, t_mm),
                 bound="copy" if t_bw >= t_mm else "matmul", ratio=None, gbs=None, gflops=None,
                 how="")
        rows.append(r)
        set_bytes = B * cdiv(C, DECODE_BLOCK) * DECODE_BLOCK * DECODE_TOKEN_BYTES[cache]
        nsets = max(1, min(32, cdiv(rotate, set_bytes)))
        try:
            got, how = None, ""
            # the faster of the compute dtypes asked for, each timed in full
            for compute in computes:
                fn, h = make_decode(torch, dev, B, C, H, cache, nsets, gen, compute)
                if fn is None:
                    how = h
                    continue
                g = sample(timer, fn, nsets, warm, reps, args.max_call_s, cuda)
                r.setdefault("variants", {})[compute] = (
                    median(g["ts"]) if "ts" in g else None)
                if got is None or ("ts" in g and ("ts" not in got
                                                  or median(g["ts"]) < median(got["ts"]))):
                    got, how, r["compute"] = g, h, compute
                del fn
            r["how"] = how
            if got is None:
                r["status"], r["note"] = "unsupported", "unsupported: " + how
                continue
            if "skipped" in got:
                r["status"], r["note"] = "skipped", "skipped: %.2f s per call" % got["skipped"]
                continue
            ts = got["ts"]
            t = median(ts)
            r.update(median_s=t, min_s=min(ts), reps=len(ts), input_sets=nsets, cpu_s=got["cpu_s"],
                     gbs=nbytes / t / 1e9,
                     gflops=flops / t / 1e9,
                     ratio=(r["roofline_s"] / t) if r["roofline_s"] else None)
        except Exception as e:  # report, never stop the sweep
            r["status"], r["note"] = "error", "error: %s: %s" % (type(e).__name__,
                                                                 str(e).split("\n")[0][:160])
        finally:
            if cuda:
                torch.cuda.empty_cache()
        print("  B=%-3d C=%-6d H=%-3d %-10s %s" % (B, C, H, cache, (
            "%.1f us" % (1e6 * r["median_s"])) if r["status"] == "ok" else r["note"]),
            file=sys.stderr)
    print_ceilings(ceil)
    print()
    print("%5s %6s %4s %-10s %5s %11s %11s %9s %9s %5s %8s" % (
        "batch", "ctx", "H", "cache", "dtype", "median_us", "min_us", "GB/s", "GFLOP/s", "reps",
        "roof%"))
    for r in rows:
        print("%5d %6d %4d %-10s " % (r["batch"], r["context"], r["heads"], r["cache"]), end="")
        if r["status"] != "ok":
            print(r["note"])
            continue
        print("%5s %11.1f %11.1f %9.2f %9.1f %5d %s" % (
            r["compute"], 1e6 * r["median_s"], 1e6 * r["min_s"], r["gbs"], r["gflops"], r["reps"],
            ("%7.1f%%" % (100 * r["ratio"])) if r["ratio"] is not None else "     n/a"))
    print("\nsweep: %.1f s; torch eager peer of mla bench decode; median of the reps after "
          "warm-up" % (time.time() - start))
    return finish(args.json, rows, bench="peer_torch_decode", torch=torch.__version__,
                  device=devname, ceilings=ceil)


def compare_decode(ours, peer):
    def key(r):
        return (r["batch"], r["context"], r["heads"], r["cache"], r.get("topk", 0))
    pr = {key(r): r for r in peer["rows"]}
    compare_head("decode side by side", ours, peer)
    print("%5s %6s %4s %-10s %12s %12s %9s %8s %8s" % (
        "batch", "ctx", "H", "cache", "ours_us", "peer_us", "peer/ours", "ours%", "peer%"))
    for r in ours["rows"]:
        p = pr.get(key(r))
        o_ok = r["status"] == "ok"
        p_ok = p is not None and p["status"] == "ok"
        ou = "%12.1f" % (1e6 * r["median_s"]) if o_ok else "%12s" % r["status"]
        pu = "%12.1f" % (1e6 * p["median_s"]) if p_ok else "%12s" % (p["status"] if p else "-")
        sp = "%9.2f" % (p["median_s"] / r["median_s"]) if o_ok and p_ok else "%9s" % "-"
        orat = "%7.1f%%" % (100 * r["ratio"]) if o_ok and r.get("ratio") is not None else "%8s" % "-"
        prat = "%7.1f%%" % (100 * p["ratio"]) if p_ok and p.get("ratio") is not None else "%8s" % "-"
        print("%5d %6d %4d %-10s %s %s %s %s %s" % (r["batch"], r["context"], r["heads"],
                                                    r["cache"], ou, pu, sp, orat, prat))
    print("peer/ours > 1: the library is faster. Ratios to each side's own ceilings.")


# --------------------------------------------------------------- prefill

PREFILL_DQK, PREFILL_DV = 192, 128


def prefill_cases(args):
    """The rows of `mla bench prefill` (batch, T, heads), in its order."""
    if args.tokens_given or args.batch or args.heads:
        ts = [int(x) for x in (args.tokens if args.tokens_given else "4096").split(",")]
        bs = [int(x) for x in (args.batch or "1").split(",")]
        hs = [int(x) for x in (args.heads or "128").split(",")]
        rows = [(b, t, h) for t in ts for b in bs for h in hs]
    elif args.quick:
        rows = [(1, 256, 16), (1, 512, 16)]
    else:
        rows = [(b, t, h) for t in (512, 1024, 2048, 4096, 8192, 16384) for b in (1, 4)
                for h in (16, 128)]
    rows.sort(key=lambda r: r[0] * r[1] * (r[1] + 1) * r[2])
    return rows


def plain_causal(torch, sets, T, scale):
    """Causal attention without SDPA: scores in fp32 with the upper triangle masked, a chunk
    of heads at a time so that the scores stay under 256 MiB."""
    mask = torch.ones(T, T, dtype=torch.bool, device=sets[0][0].device).triu(1)
    hc = max(1, (1 << 28) // (4 * T * T))

    def fn(i):
        q, k, v = sets[i]
        outs = []
        for h0 in range(0, q.shape[1], hc):
            s = torch.matmul(q[:, h0:h0 + hc], k[:, h0:h0 + hc].transpose(-1, -2)).float()
            s = (s * scale).masked_fill_(mask, float("-inf"))
            outs.append(torch.matmul(torch.softmax(s, -1).to(v.dtype), v[:, h0:h0 + hc]))
        return torch.cat(outs, 1)
    return fn


def prefill_main(args):
    """torch's scaled_dot_product_attention on the expanded problem of `mla bench
    prefill`: q, k [B, H, T, 192], v [B, H, T, 128] bf16, causal, the preset's
    softmax scale (K_nope and V as kv_b_proj would give them, k_pe broadcast:
    random values of the same shapes; the decompression itself is not timed)."""
    e = sweep_env(args, "peer_torch prefill")
    torch, dev, cuda, timer, ceil, gen = e.torch, e.dev, e.cuda, e.timer, e.ceil, e.gen
    F = torch.nn.functional
    bw = ceil.get("copy_gbs", 0.0) * 1e9
    mm = ceil.get("matmul_gflops", 0.0) * 1e9
    scale = decode_scale()
    rows, start = [], time.time()
    for (B, T, H) in prefill_cases(args):
        P = T * (T + 1) / 2
        flops = 2.0 * B * H * P * (PREFILL_DQK + PREFILL_DV)
        nbytes = 2 * B * H * T * (2 * PREFILL_DQK + 2 * PREFILL_DV)  # q, k, v in, o out
        t_bw = nbytes / bw if bw else 0.0
        t_mm = flops / mm if mm else 0.0
        r = dict(op="prefill", form="expanded (torch SDPA)", batch=B, tokens=T, heads=H,
                 causal=1, status="ok", note="", median_s=None, min_s=None, reps=0, bytes=nbytes,
                 flops=flops, roofline_s=max(t_bw, t_mm),
                 bound="copy" if t_bw >= t_mm else "matmul", ratio=None, gflops=None, how="")
        rows.append(r)
        try:
            nsets = max(1, min(8, cdiv(e.rotate, nbytes)))
            sets = []
            for _ in range(nsets):
                q = torch.randn(B, H, T, PREFILL_DQK, device=dev, generator=gen).to(torch.bfloat16)
                k = torch.randn(B, H, T, PREFILL_DQK, device=dev, generator=gen).to(torch.bfloat16)
                v = torch.randn(B, H, T, PREFILL_DV, device=dev, generator=gen).to(torch.bfloat16)
                sets.append((q, k, v))

            if hasattr(F, "scaled_dot_product_attention"):
                def fn(i):
                    q, k, v = sets[i]
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
                r["how"] = "F.scaled_dot_product_attention(is_causal=True), bf16, d_qk 192, d_v 128"
            else:  # torch < 2.0 (Debian 12's 1.13): what a user of it writes
                fn = plain_causal(torch, sets, T, scale)
                r["how"] = ("plain PyTorch (this torch has no SDPA): bf16 q k^T, fp32 masked "
                            "softmax, bf16 P v, heads in chunks of <= 256 MiB of scores")
            got = sample(timer, fn, nsets, e.warm, e.reps, args.max_call_s, cuda)
            if "skipped" in got:
                r["status"], r["note"] = "skipped", "skipped: %.2f s per call" % got["skipped"]
                continue
            ts = got["ts"]
            t = median(ts)
            r.update(median_s=t, min_s=min(ts), reps=len(ts), input_sets=nsets, cpu_s=got["cpu_s"],
                     gflops=flops / t / 1e9,
                     ratio=(r["roofline_s"] / t) if r["roofline_s"] else None)
        except Exception as ex:  # report, never stop the sweep
            r["status"], r["note"] = "error", "error: %s: %s" % (type(ex).__name__,
                                                                 str(ex).split("\n")[0][:160])
        finally:
            sets = None
            if cuda:
                torch.cuda.empty_cache()
        print("  B=%-3d T=%-6d H=%-3d %s" % (B, T, H, (
            "%.1f us" % (1e6 * r["median_s"])) if r["status"] == "ok" else r["note"]),
            file=sys.stderr)
    print_ceilings(ceil)
    print()
    print("%5s %6s %4s %12s %12s %9s %5s %8s" % ("batch", "T", "H", "median_us", "min_us",
                                                "GFLOP/s", "reps", "roof%"))
    for r in rows:
        print("%5d %6d %4d " % (r["batch"], r["tokens"], r["heads"]), end="")
        if r["status"] != "ok":
            print(r["note"])
            continue
        print("%12.1f %12.1f %9.1f %5d %s" % (
            1e6 * r["median_s"], 1e6 * r["min_s"], r["gflops"], r["reps"],
            ("%7.1f%%" % (100 * r["ratio"])) if r["ratio"] is not None else "     n/a"))
    print("\nsweep: %.1f s; torch attention (SDPA, or the plain form without it) on the expanded "
          "problem, FLOPs = 2 B H P (192 + 128), "
          "P = T (T + 1) / 2; median of the reps after warm-up" % (time.time() - start))
    return finish(args.json, rows, bench="peer_torch_prefill", torch=torch.__version__,
                  device=e.devname, ceilings=ceil)


def compare_prefill(ours, peer):
    key = lambda r: (r["batch"], r["tokens"], r["heads"])  # noqa: E731
    pr = {key(r): r for r in peer["rows"]}
    compare_head("prefill side by side", ours, peer)
    print("%5s %6s %4s %-9s %12s %12s %9s %10s %10s %8s %8s" % (
        "batch", "T", "H", "form", "ours_us", "peer_us", "peer/ours", "ours_xGF/s", "peer_GF/s",
        "ours%", "peer%"))
    for r in ours["rows"]:
        p = pr.get(key(r))
        o_ok = r["status"] == "ok"
        p_ok = p is not None and p["status"] == "ok"
        ou = "%12.1f" % (1e6 * r["median_s"]) if o_ok else "%12s" % r["status"]
        pu = "%12.1f" % (1e6 * p["median_s"]) if p_ok else "%12s" % (p["status"] if p else "-")
        sp = "%9.2f" % (p["median_s"] / r["median_s"]) if o_ok and p_ok else "%9s" % "-"
        ox = "%10.1f" % (r["flops_expanded"] / r["median_s"] / 1e9) if o_ok else "%10s" % "-"
        pg = "%10.1f" % p["gflops"] if p_ok else "%10s" % "-"
        orat = "%7.1f%%" % (100 * r["ratio"]) if o_ok and r.get("ratio") else "%8s" % "-"
        prat = "%7.1f%%" % (100 * p["ratio"]) if p_ok and p.get("ratio") else "%8s" % "-"
        print("%5d %6d %4d %-9s %s %s %s %s %s %s %s" % (r["batch"], r["tokens"], r["heads"],
                                                       r["form"], ou, pu, sp, ox, pg, orat, prat))
    print("peer/ours > 1: the library is faster. xGF/s: the expanded form's FLOPs per second "
          "(the peer's count); ratios to each side's own ceilings and own FLOP counts.")


# ----------------------------------------------------------------- layer

def layer_main(args):
    """One decode step of an MLA layer, the peer of `mla demo`'s steps: B
    sequences with --context cached tokens each (history + prefill), one new
    token each: q (q_a + RMSNorm + q_b, or q_proj without q_lora), kv_a +
    RMSNorm, RoPE on q_pe and k_pe, the latent row written to a paged cache
    (block 16, as the demo's) by index_copy_, the W_kc absorb (bmm), absorbed
    attention over the gathered pages (bmm, softmax, bmm), W_vc (bmm), o_proj.
    Weights bf16 (the demo's default); compute bf16 or f32 (--peer-dtype; best:
    the faster on a CPU). The same step is timed repeatedly; median."""
    e = sweep_env(args, "peer_torch layer")
    torch, dev, cuda, timer, gen = e.torch, e.dev, e.cuda, e.timer, e.gen
    F = torch.nn.functional
    c = dict(CONFIGS[args.config], name=args.config)
    H, L, R, n, v, Q, Hd, eps = (c["H"], c["L"], c["R"], c["nope"], c["v"], c["q_lora"],
                                 c["hidden"], c["eps"])
    B = int(args.batch or 1)
    C = int(args.contexts or 272)
    bs = 16
    cos, sin = rope_tables(torch, c, dev)
    m = 0.1 * c["mscale_all_dim"] * math.log(c["factor"]) + 1.0
    scale = (n + R) ** -0.5 * m * m
    bf = torch.bfloat16
    computes = ["bf16", "f32"] if args.peer_dtype == "best" and not cuda else [
        "bf16" if args.peer_dtype == "best" else args.peer_dtype]

    def w(*shape):
        return (torch.randn(*shape, device=dev, generator=gen) * 0.02).to(bf)
    W = dict(q_a=w(Q, Hd) if Q else None, q_b=w(H * (n + R), Q if Q else Hd), kv_a=w(L + R, Hd),
             kv_b=w(H * (n + v), L), o=w(Hd, H * v),
             q_norm=torch.ones(Q, device=dev, dtype=bf) if Q else None,
             kv_norm=torch.ones(L, device=dev, dtype=bf))
    nb = cdiv(C + 1, bs)
    bt = torch.randperm(B * nb, device=dev, generator=gen).reshape(B, nb)
    pages = (torch.rand(B * nb * bs, L + R, device=dev, generator=gen) - 0.5).to(bf)
    x = (torch.randn(B, Hd, device=dev, generator=gen) * 0.5).to(bf)
    pos = torch.full((B,), C, device=dev, dtype=torch.int64)
    slot = bt[:, C // bs] * bs + C % bs

    def rope(t, p):  # interleaved pairs, f32 math; t [B, ..., R]
        cs, sn = cos[p], sin[p]
        shp = (t.shape[0],) + (1,) * (t.dim() - 2) + (R // 2,)
        cs, sn = cs.view(shp), sn.view(shp)
        tf = t.float().unflatten(-1, (R // 2, 2))
        a, b_ = tf[..., 0], tf[..., 1]
        return torch.stack((a * cs - b_ * sn, a * sn + b_ * cs), -1).flatten(-2).to(t.dtype)

    def rms(t, g):
        tf = t.float()
        return (tf * torch.rsqrt(tf.pow(2).mean(-1, keepdim=True) + eps) * g.float()).to(bf)

    def make(cd):
        Wc = {k: (t.to(cd) if t is not None else None) for k, t in W.items()}
        kvb = Wc["kv_b"].view(H, n + v, L)
        w_kc, w_vc = kvb[:, :n, :], kvb[:, n:, :].transpose(1, 2)  # [H, n, L], [H, L, v]

        def step():
            xc = x.to(cd)
            qa = rms(F.linear(xc, Wc["q_a"]), W["q_norm"]).to(cd) if Q else xc
            q = F.linear(qa, Wc["q_b"]).view(B, H, n + R)
            kv = F.linear(xc, Wc["kv_a"])
            c_kv = rms(kv[:, :L], W["kv_norm"])
            k_pe = rope(kv[:, L:].to(bf), pos)
            pages.index_copy_(0, slot, torch.cat((c_kv, k_pe), -1))
            q_pe = rope(q[..., n:], pos)
            q_lat = torch.bmm(q[..., :n].transpose(0, 1), w_kc).transpose(0, 1)  # [B, H, L]
            qc = torch.cat((q_lat, q_pe.to(cd)), -1)
            k = pages.view(B * nb, bs, L + R)[bt].reshape(B, nb * bs, L + R)[:, :C + 1].to(cd)
            sc = torch.bmm(qc, k.transpose(1, 2)) * scale
            o_lat = torch.bmm(torch.softmax(sc, -1), k[..., :L])  # [B, H, L]
            o = torch.bmm(o_lat.transpose(0, 1), w_vc).transpose(0, 1).reshape(B, H * v)
            return F.linear(o, Wc["o"]).to(bf)
        return step

    best = None
    for cd in computes:
        fn = make(torch.float32 if cd == "f32" else bf)
        got = sample(timer, lambda i: fn(), 1, e.warm, max(e.reps, 9), args.max_call_s, cuda)
        if "ts" in got and (best is None or median(got["ts"]) < median(best[1]["ts"])):
            best = (cd, got)
        print("  %s: %s" % (cd, ("%.3f ms" % (1e3 * median(got["ts"]))) if "ts" in got
                            else "skipped"), file=sys.stderr)
    if best is None:
        print("layer: every variant skipped (--max-call-s)")
        return 1
    cd, got = best
    t = median(got["ts"])
    print("layer decode step: %s, batch %d, context %d (+1 new token), weights bf16, compute %s"
          % (c["name"], B, C, cd))
    print("decode: median step %.3f ms, %.1f tokens/s (batch %d); min %.3f ms over %d reps" % (
        1e3 * t, B / t, B, 1e3 * min(got["ts"]), len(got["ts"])))
    return finish(args.json, [dict(op="layer_decode_step", config=c["name"], batch=B, context=C,
                                   compute=cd, status="ok", median_s=t, min_s=min(got["ts"]),
                                   reps=len(got["ts"]))],
                  bench="peer_torch_layer", torch=torch.__version__, device=e.devname,
                  ceilings=e.ceil)


def add_common_args(ap):
    """The options every peer takes: device, timing, ceilings, output."""
    ap.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    ap.add_argument("--reps", type=int, default=None, help="samples per row (cuda 20, cpu 5)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed calls (cuda 5, cpu 1)")
    ap.add_argument("--rotate-mib", type=int, default=None, help="cuda 256, cpu 128")
    ap.add_argument("--copy-mib", type=int, default=None)
    ap.add_argument("--max-call-s", type=float, default=2.0)
    ap.add_argument("--no-ceilings", action="store_true")
    ap.add_argument("--threads", type=int, default=None,
                    help="CPU threads for torch (default: every logical CPU, like mla's context)")
    ap.add_argument("--no-mkldnn", action="store_true",
                    help="torch.backends.mkldnn.enabled = False: bf16 matmuls on torch's own "
                         "kernels, as on a CPU without AVX-512 (bench/run_cpu.sh, avx2)")
    ap.add_argument("--seed", type=int, default=0x6d6c61)
    ap.add_argument("--json", default=None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="DeepSeek-V3", choices=sorted(CONFIGS))
    ap.add_argument("--tokens", default=None, help="prepare: 1,16,128,1024; prefill: T values")
    ap.add_argument("--ops", default=None, help="comma list of op names (as mla bench)")
    add_common_args(ap)
    ap.add_argument("--compare", nargs=2, metavar=("OURS_JSON", "PEER_JSON"))
    ap.add_argument("--decode", action="store_true",
                    help="the peer of `mla bench decode` (paged MLA decode) instead")
    ap.add_argument("--prefill", action="store_true",
                    help="the peer of `mla bench prefill` (torch SDPA, expanded form) instead")
    ap.add_argument("--layer", action="store_true",
                    help="one MLA layer decode step, the peer of `mla demo` (--config, --batch B, "
                         "--contexts C: cached tokens per sequence, default 272)")
    ap.add_argument("--batch", default=None, help="decode / prefill: batch sizes (a cross product)")
    ap.add_argument("--contexts", default=None, help="decode: context lengths")
    ap.add_argument("--heads", default=None, help="decode / prefill: head counts")
    ap.add_argument("--quick", action="store_true",
                    help="decode: batch 1 and 4, context 1024; prefill: T 256 and 512")
    ap.add_argument("--peer-dtype", default="best", choices=["bf16", "f32", "best"],
                    help="decode: the compute dtype (best: the faster of bf16 and f32 per row "
                         "on a CPU, bf16 on a GPU)")
    args = ap.parse_args()
    if args.compare:
        compare(*args.compare)
        return 0
    args.tokens_given = args.tokens is not None
    if args.decode:
        return decode_main(args)
    if args.prefill:
        return prefill_main(args)
    if args.layer:
        return layer_main(args)
    args.tokens = args.tokens or "1,16,128,1024"

    c = dict(CONFIGS[args.config], name=args.config)
    tokens = sorted(int(t) for t in args.tokens.split(","))
    ops = set(args.ops.split(",")) if args.ops else None
    e = sweep_env(args, "peer_torch", "config %s; tokens %s; " % (
        args.config, ",".join(map(str, tokens))))
    torch, dev, cuda, timer, ceil, gen = e.torch, e.dev, e.cuda, e.timer, e.ceil, e.gen
    reps, warm, rotate, devname = e.reps, e.warm, e.rotate, e.devname
    tabs = rope_tables(torch, c, dev)

    rows, start = [], time.time()
    for case, op, variant, is_gemm, is_whole in CASES:
        if ops and op not in ops:
            continue
        for T in tokens:
            b, w, f = counts(c, case, T)
            r = dict(op=op, variant=variant, shape=shape_name(c, case), T=T, status="ok",
                     note="", median_s=None, min_s=None, max_s=None, reps=0, batch=0,
                     input_sets=0, bytes=b, weight_bytes=w, flops=f, is_gemm=is_gemm,
                     is_whole=is_whole, how="")
            rows.append(r)
            nsets = max(1, min(32, cdiv(rotate, max(b, 1))))
            try:
                fn, how = make_case(torch, dev, c, case, T, nsets, tabs, gen)
                r["how"] = how
                if fn is None:
                    r["status"], r["note"] = "unsupported", "unsupported: " + how
                    continue
                got = sample(timer, fn, nsets, warm, reps, args.max_call_s, cuda,
                             None if cuda else torch.get_num_threads())
                if "skipped" in got:
                    r["status"], r["note"] = "skipped", "skipped: %.2f s per call" % got["skipped"]
                    continue
                ts = got["ts"]
                r.update(median_s=median(ts), min_s=min(ts), max_s=max(ts), reps=len(ts),
                         batch=got["k"], input_sets=nsets, cpu_util=got["cpu_util"])
            except Exception as e:  # report, never stop the sweep
                r["status"], r["note"] = "error", "error: %s: %s" % (type(e).__name__,
                                                                     str(e).split("\n")[0][:160])
            finally:
                if cuda:
                    torch.cuda.empty_cache()
            print("  %-11s %-11s T=%-5d %s" % (op, variant, T, (
                "%.1f us" % (1e6 * r["median_s"])) if r["status"] == "ok" else r["note"]),
                file=sys.stderr)
    judge(rows, ceil)
    print_ceilings(ceil)
    if ceil:
        for p in ceil["matmul_points"]:
            print("    M=%-5d N=%-5d K=%-5d %-8s %9.1f GFLOP/s" % (p["M"], p["N"], p["K"],
                                                                p["dtype"], p["gflops"]))
    print()
    print_table(rows)
    print("\nsweep: %.1f s; torch eager peer; median of the reps after warm-up" % (
        time.time() - start))
    return finish(args.json, rows, bench="peer_torch", torch=torch.__version__, device=devname,
                  config=args.config, tokens=tokens, ceilings=ceil)


if __name__ == "__main__":
    sys.exit(main())
