"""Number formats (MLA.md section 5): scalar conversions, and the tensor ops
convert, MXFP4 quant / dequant and fp8 group quant / dequant.

Every op takes ``ctx=None`` (the default context of its tensors' device,
see libmla.default_context) and writes into ``out`` / the named outputs
when given, else allocates them like its first input and returns them."""

import ctypes

from . import _lib
from . import _tensor as TS
from . import _types as T
from . import _util as U
from .context import Call

S = T.Status
DT = T.DType


# ---------------------------------------------------------------- scalars

def f32_to_bf16(x):
    """The bf16 bits of float x (round to nearest even; NaN -> 0x7FC0)."""
    return _lib.lib().mla_f32_to_bf16(x)


def bf16_to_f32(bits):
    return _lib.lib().mla_bf16_to_f32(bits)


def f32_to_f16(x):
    return _lib.lib().mla_f32_to_f16(x)


def f16_to_f32(bits):
    return _lib.lib().mla_f16_to_f32(bits)


def f32_to_fp8(x, fp8="e4m3fn", saturate=True):
    """The fp8 code of x (saturating, or NaN above max when saturate=False)."""
    mode = T.Saturation.SATURATE if saturate else T.Saturation.NON_SATURATE
    return _lib.lib().mla_f32_to_fp8(x, int(U.fp8_dtype(fp8)), int(mode))


def fp8_to_f32(code, fp8="e4m3fn"):
    return _lib.lib().mla_fp8_to_f32(code, int(U.fp8_dtype(fp8)))


def fp8_max(fp8="e4m3fn"):
    """448 (e4m3fn) or 240 (e4m3fnuz)."""
    return _lib.lib().mla_fp8_max(int(U.fp8_dtype(fp8)))


def e8m0_to_f32(code):
    return _lib.lib().mla_e8m0_to_f32(code)


def f32_to_fp4(x):
    """The nearest e2m1 code (4 bits), ties to even, |x| >= 6 -> 6, sign kept."""
    return _lib.lib().mla_f32_to_fp4(x)


def fp4_to_f32(code):
    return _lib.lib().mla_fp4_to_f32(code)


def mxfp4_quantize_block(x, rule="production"):
    """One 32-value block -> (16 packed code bytes, e8m0 scale byte)."""
    vals = list(x)
    U.need(len(vals) == 32, S.ERR_SHAPE, "x", "an MXFP4 block is 32 values, got %d" % len(vals))
    xs = (ctypes.c_float * 32)(*vals)
    codes = (ctypes.c_uint8 * 16)()
    scale = ctypes.c_uint8()
    _lib.lib().mla_mxfp4_quantize_block(xs, int(U.enum(T.MxFp4Rule, rule, "rule")), codes,
                                        ctypes.byref(scale))
    return bytes(codes), scale.value


def scale_preshuffled_bytes(M, N):
    """Bytes of the gfx950 pre-shuffled scale layout for [M, N] scales."""
    return _lib.lib().mla_scale_preshuffled_bytes(M, N)


def scale_preshuffled_offset(m, n, N):
    return _lib.lib().mla_scale_preshuffled_offset(m, n, N)


# -------------------------------------------------------------------- ops

def convert(x, out=None, *, dtype=None, saturate=True, ctx=None):
    """``out`` = x converted elementwise (F32, F16, BF16, the fp8 flavours;
    E8M0 and FP4X2 as sources, FP4X2 also as a target; an FP4X2 side has
    half the last extent). fp8 targets saturate unless ``saturate=False``.

    Give ``out``, or ``dtype`` for a new output."""
    c = Call(ctx, x, out)
    px = c.t(x, "x")
    shp = list(U.shape(px))
    if out is None:
        U.need(dtype is not None, S.ERR_INVALID_ARGUMENT, "dtype", "give out= or dtype=")
        dt = TS.dtype_of(dtype)
        if shp and (dt == DT.FP4X2) != (U.dtype(px) == DT.FP4X2):
            shp[-1] = shp[-1] // 2 if dt == DT.FP4X2 else shp[-1] * 2
    else:
        dt = TS.dtype_of(dtype) if dtype is not None else None
    py, out = c.out(out, "y", shp, dt, hint=dt)
    mode = T.Saturation.SATURATE if saturate else T.Saturation.NON_SATURATE
    c.check(_lib.lib().mla_convert(c.h, px, py, int(mode)))
    return out


def _scales_out(c, scales, M, N, layout):
    if layout == T.ScaleLayout.PRESHUFFLED_GFX950:
        return c.out(scales, "scales", (scale_preshuffled_bytes(M, N),), DT.E8M0, hint=DT.E8M0)
    if layout == T.ScaleLayout.TRANSPOSED:
        return U.transposed(c, scales, "scales", (M, N), DT.E8M0)
    return c.out(scales, "scales", (M, N), DT.E8M0, hint=DT.E8M0)


def mxfp4_quant(x, codes=None, scales=None, *, layout="row_major", rule="production", ctx=None):
    """x [M, K] (F32, BF16, F16), K % 32 == 0 -> (codes [M, K/2] fp4x2,
    scales e8m0): ``layout`` "row_major" [M, K/32], "transposed" ([M, K/32]
    with strides (1, M)) or "preshuffled_gfx950" (1-D); ``rule``
    "production" (aiter) or "ocp"."""
    layout = U.enum(T.ScaleLayout, layout, "layout")
    c = Call(ctx, x, codes, scales)
    px = c.t(x, "x")
    M, K = U.rank(px, 2, "x")
    pc, codes = c.out(codes, "codes", (M, K // 2), DT.FP4X2, hint=DT.FP4X2)
    ps, scales = _scales_out(c, scales, M, K // 32, layout)
    c.check(_lib.lib().mla_mxfp4_quant(c.h, px, pc, ps, int(layout),
                                       int(U.enum(T.MxFp4Rule, rule, "rule"))))
    return codes, scales


def mxfp4_dequant(codes, scales, out=None, *, layout="row_major", dtype="f32", ctx=None):
    """codes [M, K/2] + scales (``layout`` as for mxfp4_quant) -> [M, K]
    (F32, BF16, F16): fp4 value * 2^(scale - 127); a NaN scale gives NaN."""
    layout = U.enum(T.ScaleLayout, layout, "layout")
    c = Call(ctx, codes, scales, out)
    pc = c.t(codes, "codes", hint=DT.FP4X2)
    ps = c.t(scales, "scales", hint=DT.E8M0)
    M, K2 = U.rank(pc, 2, "codes")
    dt = TS.dtype_of(dtype)
    py, out = c.out(out, "y", (M, 2 * K2), dt, hint=dt)
    c.check(_lib.lib().mla_mxfp4_dequant(c.h, pc, ps, int(layout), py))
    return out


def fp8_group_quant(x, codes=None, scales=None, *, group=128, rule="aiter", fp8="e4m3fn",
                    scales_transposed=False, ctx=None):
    """x [M, K] (F32, BF16, F16), K % group == 0 -> (codes [M, K] fp8 of
    flavour ``fp8``, scales F32 [M, K/group], row-major or transposed).
    ``rule``: "aiter", "ue8m0" or "div" (libmla.Fp8ScaleRule)."""
    fp8 = U.fp8_dtype(fp8)
    c = Call(ctx, x, codes, scales)
    px = c.t(x, "x")
    M, K = U.rank(px, 2, "x")
    pc, codes = c.out(codes, "codes", (M, K), fp8, hint=fp8)
    if scales_transposed:
        ps, scales = U.transposed(c, scales, "scales", (M, K // group), DT.F32)
    else:
        ps, scales = c.out(scales, "scales", (M, K // group), DT.F32)
    c.check(_lib.lib().mla_fp8_group_quant(c.h, px, pc, ps, int(group),
                                           int(U.enum(T.Fp8ScaleRule, rule, "rule"))))
    return codes, scales


def fp8_group_dequant(codes, scales, out=None, *, group=128, dtype="f32", fp8="e4m3fn",
                      ctx=None):
    """codes [M, K] fp8 (uint8 codes read as flavour ``fp8``) and F32 scales
    [M, K/group] -> [M, K] (F32, BF16, F16) = code * its group's scale."""
    fp8 = U.fp8_dtype(fp8)
    c = Call(ctx, codes, scales, out)
    pc = c.t(codes, "codes", hint=fp8)
    ps = c.t(scales, "scales")
    dt = TS.dtype_of(dtype)
    py, out = c.out(out, "y", U.rank(pc, 2, "codes"), dt, hint=dt)
    c.check(_lib.lib().mla_fp8_group_dequant(c.h, pc, ps, int(group), py))
    return out
