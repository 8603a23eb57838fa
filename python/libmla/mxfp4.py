"""The MXFP4 GEMM path (MLA.md sections 5 and 7, seed 003): batched
a16wfp4 / a4w4 GEMMs that write through any output strides, and the fused
flatten + quant handing W_vc's [T, H, v] output to o_proj without a copy."""

import ctypes

from . import _lib
from . import _tensor as TS
from . import _types as T
from . import _util as U
from .context import Call

DT = T.DType


def _operand(c, codes, scales, layout, name):
    op = T.MxFp4Operand()
    pc = c.t(codes, name + ".codes", hint=DT.FP4X2)
    ps = c.t(scales, name + ".scales", hint=DT.E8M0)
    op.codes, op.scales = pc.contents, ps.contents
    op.layout = int(U.enum(T.ScaleLayout, layout, name + ".layout"))
    return op


def batched_gemm_a16wfp4(x, w_codes, w_scales, out=None, *, w_layout="row_major", prequant=True,
                         rule="production", dtype=None, ctx=None):
    """out[b] = A(x[b]) @ deq(w[b])^T, fp32 accumulation: x [B, M, K] (BF16,
    F32), w codes [B, N, K/2] + e8m0 scales (``w_layout``), out [B, M, N]
    through its strides. A quantizes x to MXFP4 by ``rule`` first when
    ``prequant`` (aiter's only mode), else is the identity."""
    c = Call(ctx, x, out)
    px = c.t(x, "x")
    w = _operand(c, w_codes, w_scales, w_layout, "w")
    B, M, _ = U.rank(px, 3, "x")
    dt = TS.dtype_of(dtype) if dtype is not None else U.dtype(px)
    py, out = c.out(out, "y", (B, M, w.codes.shape[1]), dt, hint=dt)
    c.check(_lib.lib().mla_batched_gemm_a16wfp4(c.h, px, ctypes.byref(w), 1 if prequant else 0,
                                                int(U.enum(T.MxFp4Rule, rule, "rule")), py))
    return out


def batched_gemm_a4w4(x_codes, x_scales, w_codes, w_scales, out=None, *, x_layout="row_major",
                      w_layout="row_major", dtype="bf16", ctx=None):
    """out[b] = deq(x[b]) @ deq(w[b])^T with activations already MXFP4: x
    codes [B, M, K/2] + scales, w codes [B, N, K/2] + scales."""
    c = Call(ctx, x_codes, out)
    x = _operand(c, x_codes, x_scales, x_layout, "x")
    w = _operand(c, w_codes, w_scales, w_layout, "w")
    dt = TS.dtype_of(dtype)
    py, out = c.out(out, "y", (x.codes.shape[0], x.codes.shape[1], w.codes.shape[1]), dt, hint=dt)
    c.check(_lib.lib().mla_batched_gemm_a4w4(c.h, ctypes.byref(x), ctypes.byref(w), py))
    return out


def fused_flatten_mxfp4_quant(x, codes=None, scales=None, *, rule="production",
                              scales_transposed=False, ctx=None):
    """x [T, H, v] (BF16, F32, any strides) -> MXFP4 of the rows [T, H*v]:
    (codes [T, H*v/2], e8m0 scales [T, H*v/32], row-major or transposed)."""
    c = Call(ctx, x, codes, scales)
    px = c.t(x, "x")
    T_, H, V = U.rank(px, 3, "x")
    pc, codes = c.out(codes, "codes", (T_, H * V // 2), DT.FP4X2, hint=DT.FP4X2)
    if scales_transposed:
        ps, scales = U.transposed(c, scales, "scales", (T_, H * V // 32), DT.E8M0)
    else:
        ps, scales = c.out(scales, "scales", (T_, H * V // 32), DT.E8M0, hint=DT.E8M0)
    c.check(_lib.lib().mla_fused_flatten_mxfp4_quant(c.h, px, pc, ps,
                                                     int(U.enum(T.MxFp4Rule, rule, "rule"))))
    return codes, scales


def fused_flatten_fp8_group_quant(x, codes=None, scales=None, *, fp8="e4m3fn",
                                  scales_transposed=False, ctx=None):
    """x [T, H, v] -> fp8 of [T, H*v] in groups of 128 (aiter's rule):
    (codes [T, H*v], F32 scales [T, H*v/128], row-major or transposed)."""
    fp8 = U.fp8_dtype(fp8)
    c = Call(ctx, x, codes, scales)
    px = c.t(x, "x")
    T_, H, V = U.rank(px, 3, "x")
    pc, codes = c.out(codes, "codes", (T_, H * V), fp8, hint=fp8)
    if scales_transposed:
        ps, scales = U.transposed(c, scales, "scales", (T_, H * V // 128), DT.F32)
    else:
        ps, scales = c.out(scales, "scales", (T_, H * V // 128), DT.F32)
    c.check(_lib.lib().mla_fused_flatten_fp8_group_quant(c.h, px, pc, ps))
    return codes, scales
