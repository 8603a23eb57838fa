"""The MXFP4 GEMM path: a16wfp4 / a4w4 against the dequantized operands in
float64 (outputs through a transposed view), and the fused flatten quants
reading a strided [T, H, v] view against quantizing its flattened copy."""

import numpy as np

import libmla
from conftest import bf16_bits, bf16_values

U24 = 2.0 ** -24


def operand(x, ctx):
    """x [B, R, K] -> (codes, scales) per batch, and the dequantized values."""
    cs = [libmla.mxfp4_quant(xb, ctx=ctx) for xb in x]
    codes = np.stack([c for c, _ in cs])
    scales = np.stack([s for _, s in cs])
    deq = np.stack([libmla.mxfp4_dequant(c, s, ctx=ctx) for c, s in cs]).astype(np.float64)
    return codes, scales, deq


def test_a16wfp4_and_a4w4(cpu, ref, rng):
    B, M, N, K = 2, 3, 40, 64
    x = rng.standard_normal((B, M, K)).astype(np.float32)
    wc, ws, wd = operand(rng.standard_normal((B, N, K)).astype(np.float32), cpu)
    xc, xs, xd = operand(x, cpu)
    want = np.einsum("bmk,bnk->bmn", xd, wd)
    bound = (K + 1) * U24 * np.einsum("bmk,bnk->bmn", np.abs(xd), np.abs(wd))
    for ctx in (cpu, ref):
        buf = np.zeros((M, B, N), np.float32)  # [M, B, N] written as a [B, M, N] view
        y = libmla.batched_gemm_a16wfp4(x, wc, ws, buf.transpose(1, 0, 2), ctx=ctx)
        assert y.base is buf and np.all(np.abs(y - want) <= bound)
        y4 = libmla.batched_gemm_a4w4(xc, xs, wc, ws, dtype="f32", ctx=ctx)
        assert np.all(np.abs(y4 - want) <= bound)
    xb = bf16_values(bf16_bits(x)).astype(np.float64)
    y = libmla.batched_gemm_a16wfp4(x, wc, ws, prequant=False, ctx=cpu)
    want = np.einsum("bmk,bnk->bmn", x.astype(np.float64), wd)
    assert np.all(np.abs(y - want) <= (K + 1) * U24 * np.einsum("bmk,bnk->bmn", np.abs(xb),
                                                                  np.abs(wd)) + 1e-30)


def test_fused_flatten_quants_read_views(cpu, ref, rng):
    H, T_, V = 4, 5, 32
    o = rng.standard_normal((H, T_, V)).astype(np.float32)
    view = o.transpose(1, 0, 2)  # [T, H, v], strided
    flat = np.ascontiguousarray(view).reshape(T_, H * V)
    c, s = libmla.fused_flatten_mxfp4_quant(view, ctx=cpu)
    c2, s2 = libmla.mxfp4_quant(flat, ctx=ref)
    assert np.array_equal(c, c2) and np.array_equal(s, s2)
    ct, st = libmla.fused_flatten_mxfp4_quant(view, scales_transposed=True, ctx=cpu)
    assert np.array_equal(ct, c) and np.array_equal(st, s) and st.strides == (1, T_)
    o8 = rng.standard_normal((H, T_, V * 8)).astype(np.float32)
    c8, s8 = libmla.fused_flatten_fp8_group_quant(o8.transpose(1, 0, 2), ctx=cpu)
    f8, g8 = libmla.fp8_group_quant(np.ascontiguousarray(o8.transpose(1, 0, 2))
                                    .reshape(T_, H * V * 8), ctx=ref)
    assert np.array_equal(c8, f8) and np.array_equal(s8, g8)
