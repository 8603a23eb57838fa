"""Number formats: scalar conversions, convert, MXFP4 and fp8 group quant,
zero-copy into the caller's buffers and strided views, each op on the CPU
backend against the reference backend (the C library's oracle)."""

import numpy as np
import pytest

import libmla
from conftest import bf16_bits, bf16_values


def test_scalars():
    assert libmla.f32_to_bf16(1.0) == 0x3F80
    assert libmla.bf16_to_f32(0xC020) == -2.5
    assert libmla.f32_to_f16(1.0) == 0x3C00 and libmla.f16_to_f32(0x3C00) == 1.0
    assert libmla.fp8_max("e4m3fn") == 448 and libmla.fp8_max("e4m3fnuz") == 240
    assert libmla.f32_to_fp8(1000.0, "e4m3fn") == 0x7E  # saturates to 448
    assert libmla.f32_to_fp8(1000.0, "e4m3fn", saturate=False) in (0x7F, 0xFF)
    assert libmla.fp8_to_f32(0x38, "e4m3fn") == 1.0 and libmla.fp8_to_f32(0x40, "e4m3fnuz") == 1.0
    assert libmla.e8m0_to_f32(127) == 1.0 and np.isnan(libmla.e8m0_to_f32(255))
    assert libmla.f32_to_fp4(6.5) == 0x7 and libmla.fp4_to_f32(0xF) == -6.0
    codes, scale = libmla.mxfp4_quantize_block([1.0] * 32)
    assert scale == 127 - 2 and codes == bytes([0x66] * 16)  # 1.0 = 4 * 2^-2: code 6
    assert libmla.scale_preshuffled_bytes(1, 1) == 256 * 8


def test_convert_writes_into_the_callers_buffer(cpu, rng):
    x = rng.standard_normal((8, 64)).astype(np.float32)
    out = np.zeros((8, 64), np.uint16)
    ptr = out.ctypes.data
    y = libmla.convert(x, libmla.bf16(out), ctx=cpu)
    assert y is out and out.ctypes.data == ptr
    want = np.array([[libmla.f32_to_bf16(float(v)) for v in row] for row in x], np.uint16)
    assert np.array_equal(out, want)


def test_convert_strided_views(cpu, rng):
    big = rng.standard_normal((8, 128)).astype(np.float32)
    x = big[:, 1::2]  # stride 2 elements
    dst = np.full((16, 64), 7, np.float16)
    view = dst[::2]  # every other row of a bigger buffer
    libmla.convert(x, view, ctx=cpu)
    assert np.array_equal(view, x.astype(np.float16))
    assert np.all(dst[1::2] == 7)  # rows between untouched


@pytest.mark.parametrize("layout", ["row_major", "transposed", "preshuffled_gfx950"])
def test_mxfp4_quant_cpu_equals_reference(cpu, ref, rng, layout):
    x = (rng.standard_normal((32, 128)) * 3).astype(np.float32)
    c1, s1 = libmla.mxfp4_quant(x, layout=layout, ctx=cpu)
    c2, s2 = libmla.mxfp4_quant(x, layout=layout, ctx=ref)
    assert np.array_equal(c1, c2) and np.array_equal(s1, s2)
    if layout == "transposed":
        assert s1.shape == (32, 4) and s1.strides == (1, 32)
    if layout == "row_major":
        for m in (0, 17):
            for b in range(4):
                codes, scale = libmla.mxfp4_quantize_block(x[m, 32 * b:32 * b + 32])
                assert bytes(c1[m, 16 * b:16 * b + 16]) == codes and s1[m, b] == scale
    y = libmla.mxfp4_dequant(c1, s1, layout=layout, ctx=cpu)
    assert y.shape == x.shape and np.max(np.abs(y - x)) <= np.max(np.abs(x)) / 4


def test_fp8_group_quant_roundtrip(cpu, ref, rng):
    x = rng.standard_normal((4, 256)).astype(np.float32)
    for fp8 in ("e4m3fn", "e4m3fnuz"):
        c, s = libmla.fp8_group_quant(x, fp8=fp8, ctx=cpu)
        c2, s2 = libmla.fp8_group_quant(x, fp8=fp8, ctx=ref)
        assert np.array_equal(c, c2) and np.array_equal(s, s2)
        assert s.shape == (4, 2)
        y = libmla.fp8_group_dequant(c, s, fp8=fp8, ctx=cpu)
        want = np.array([[libmla.fp8_to_f32(int(v), fp8) for v in row] for row in c],
                        np.float32) * np.repeat(s, 128, axis=1)
        assert np.array_equal(y, want)
    ct, st = libmla.fp8_group_quant(x, group=64, scales_transposed=True, ctx=cpu)
    assert st.shape == (4, 4) and st.strides == (4, 16)
    _, sr = libmla.fp8_group_quant(x, group=64, ctx=cpu)
    assert np.array_equal(st, sr)


def test_bf16_helpers_agree():
    x = np.array([1.0, -2.5, 3.0e38, 0.1], np.float32)
    bits = bf16_bits(x)
    assert list(bits) == [0x3F80, 0xC020, 0x7F62, 0x3DCD]
    assert list(bf16_values(bits)) == [libmla.bf16_to_f32(int(b)) for b in bits]


def test_supports(cpu, ref):
    assert cpu.supports(libmla.Op.CONVERT, "f32", "bf16") is None
    assert ref.supports(libmla.Op.MXFP4_QUANT, "f32", "fp4x2", group=32, rows=4, cols=64) is None
    with pytest.raises(libmla.Error):
        cpu.supports(99)
