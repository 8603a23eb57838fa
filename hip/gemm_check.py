#!/usr/bin/env python3
"""Checks the HIP GEMMs at model shapes against the reference backend.

    python3 hip/gemm_check.py MLA_BINARY [--quick]

Runs `mla op linear` and `mla op batched_gemm` on seeded bf16 activations
with bf16 and fp8 e4m3fn weights (linear: 128 x 128 f32 block scales;
batched: a per-tensor scale), y in f32, once on the reference backend and
once on the hip backend, and holds every output to the conformance bound
of conformance/bounds.c, (K + 3) 2^-24 S + (K + 1) 2^-53 S with
S = sum_k |x_k| |w_k| (times the scale). The shapes cover the T <= 16
weight-stream path with K split over blocks, the 128 x 128 matrix tiles with
several m and n tiles and ragged edges, and DeepSeek-V3's projections. Set
MLA_HIP_GEMM=tile or =fma in the environment to check the other paths.
Needs numpy. Exit status 1 when an output is outside its bound.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

SHAPES = [  # op, M (T), N, K, batch
    ("linear", 1, 576, 7168, 1),
    ("linear", 16, 1536, 7168, 1),
    ("linear", 5, 24576, 1536, 1),
    ("linear", 130, 1000, 700, 1),
    ("linear", 1024, 1536, 7168, 1),
    ("batched_gemm", 16, 512, 128, 128),
    ("batched_gemm", 300, 512, 128, 8),
]
QUICK = SHAPES[:4] + SHAPES[5:6]


def bf16_round(a):
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(h):
    return (h.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def e4m3_value(c):
    c = c.astype(np.int64)
    s = np.where(c & 0x80, -1.0, 1.0)
    e, m = (c >> 3) & 15, c & 7
    v = np.where(e == 0, m / 8.0 * 2.0**-6, (1 + m / 8.0) * 2.0 ** (e - 7))
    return s * v


def run(mla, op, backend, args, out):
    r = subprocess.run([mla, "op", op, "--backend", backend, "--out", "y=" + out] + args,
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit("%s on %s failed: %s%s" % (op, backend, r.stdout, r.stderr))
    return np.load(out).astype(np.float64)


def check(mla, d, rng, op, M, N, K, B, fp8):
    lin = op == "linear"
    xs = (M, K) if lin else (B, M, K)
    ws = (N, K) if lin else (B, K, N)
    xh = bf16_round(rng.standard_normal(xs))
    np.save(d + "/x.npy", xh)
    args = ["--in", "x=%s/x.npy" % d, "--in", "w=%s/w.npy" % d, "--param", "dtype=f32",
            "--param", "in_dtype=bf16"]
    scale = 1.0
    if fp8:
        wc = rng.integers(0, 256, size=ws, dtype=np.uint8)
        wc[(wc & 0x7F) == 0x7F] = 0x38  # no NaN codes
        np.save(d + "/w.npy", wc)
        w = e4m3_value(wc)
        args += ["--param", "w_dtype=e4m3fn"]
        if lin:
            sc = (2.0 ** rng.integers(-10, -5, size=((N + 127) // 128, (K + 127) // 128)) *
                  (1 + rng.random(((N + 127) // 128, (K + 127) // 128)))).astype(np.float32)
            np.save(d + "/s.npy", sc)
            args += ["--in", "w_scale=%s/s.npy" % d]
            w = w * np.repeat(np.repeat(sc.astype(np.float64), 128, 0), 128, 1)[:N, :K]
        else:
            scale = float(np.float32(0.0173))
            args += ["--param", "w_scale=%r" % scale]
    else:
        wh = bf16_round(rng.standard_normal(ws))
        np.save(d + "/w.npy", wh)
        w = bf16_value(wh)
        args += ["--param", "w_dtype=bf16"]
    x = bf16_value(xh)
    if lin:
        S = np.abs(x) @ np.abs(w).T
    else:
        S = np.matmul(np.abs(x), np.abs(w)) * abs(scale)
    tol = (K + 3) * 2.0**-24 * S + (K + 1) * 2.0**-53 * S + (K + 3) * 2.0**-149
    ref = run(mla, op, "reference", args, d + "/yr.npy")
    got = run(mla, op, "hip", args, d + "/yh.npy")
    err = np.abs(got - ref)
    bad = ~(err <= tol + np.spacing(np.maximum(np.abs(got), np.abs(ref)).astype(np.float32)))
    worst = float(np.max(err / np.maximum(tol, 1e-300)))
    print("%-12s M %5d N %6d K %5d B %4d %-5s  worst err / bound %.4f  %s" %
          (op, M, N, K, B, "fp8" if fp8 else "bf16", worst, "FAIL" if bad.any() else "ok"))
    return not bad.any()


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    mla = sys.argv[1]
    shapes = QUICK if "--quick" in sys.argv else SHAPES
    rng = np.random.default_rng(7)
    ok = True
    with tempfile.TemporaryDirectory() as d:
        for op, M, N, K, B in shapes:
            for fp8 in (0, 1):
                ok &= check(mla, d, rng, op, M, N, K, B, fp8)
    print("gemm_check (MLA_HIP_GEMM=%s): %s" % (os.environ.get("MLA_HIP_GEMM", ""),
                                                "all within bounds" if ok else "FAILED"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
