"""Bad input: a Python exception naming what is wrong, nothing written, no
crash -- wrong device, non-tensor objects, dtypes and strides libmla cannot
take, refusals by the C library (status, parameter, sentence), a closed
context or plan, and calls after the library was unloaded."""

import numpy as np
import pytest

import libmla
from conftest import TORCH, needs_torch


def refused(status, fn, *args, **kw):
    with pytest.raises(libmla.Error) as e:
        fn(*args, **kw)
    assert e.value.status == status, str(e.value)
    assert e.value.detail
    return e.value


def test_not_a_tensor(cpu):
    e = refused("MLA_ERR_INVALID_ARGUMENT", libmla.convert, [1.0, 2.0], dtype="bf16", ctx=cpu)
    assert e.param == "x" and "not a tensor" in e.detail


def test_unsupported_dtypes(cpu):
    refused("MLA_ERR_DTYPE", libmla.convert, np.zeros(4, np.complex64), dtype="f32", ctx=cpu)
    e = refused("MLA_ERR_DTYPE", libmla.convert, np.zeros(4, np.uint16), dtype="f32", ctx=cpu)
    assert "libmla.view" in e.detail  # uint16 is bf16 only when asked
    refused("MLA_ERR_DTYPE", libmla.convert, libmla.view(np.zeros(4, np.float32), "bf16"),
            dtype="f32", ctx=cpu)  # 4-byte elements are not bf16
    refused("MLA_ERR_DTYPE", libmla.dtype_of, "float7")


def test_unsupported_strides_write_nothing(cpu):
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    out = np.full((4, 4), 5, np.float16)
    refused("MLA_ERR_STRIDE", libmla.convert, x[:, ::-1], out, ctx=cpu)
    odd = np.ndarray((3,), np.float32, buffer=np.zeros(16, np.uint8), offset=0, strides=(5,))
    refused("MLA_ERR_STRIDE", libmla.convert, odd, dtype="f16", ctx=cpu)
    refused("MLA_ERR_STRIDE", libmla.convert, x, out[:, ::-1], ctx=cpu)
    assert np.all(out == 5)


def test_c_refusals_carry_param_and_detail(cpu):
    x = np.ones((4, 48), np.float32)  # K % 32 != 0
    codes = np.full((4, 24), 9, np.uint8)
    scales = np.full((4, 1), 9, np.uint8)
    e = refused("MLA_ERR_SHAPE", libmla.mxfp4_quant, x, codes, scales, ctx=cpu)
    assert e.param.startswith("x") and e.status_text == "wrong shape"
    assert np.all(codes == 9) and np.all(scales == 9)
    y = np.full((4, 64), 3, np.float16)
    refused("MLA_ERR_SHAPE", libmla.convert, np.ones((4, 32), np.float32), y, ctx=cpu)
    assert np.all(y == 3)
    ro = np.zeros((2, 2), np.float16)
    ro.flags.writeable = False
    refused("MLA_ERR_INVALID_ARGUMENT", libmla.convert, np.ones((2, 2), np.float32), ro, ctx=cpu)


def test_aliasing_is_refused(cpu):
    buf = np.zeros(64, np.float32)
    e = refused("MLA_ERR_ALIAS", libmla.rmsnorm, buf[:32].reshape(1, 32), np.ones(32, np.float32),
                out=buf[16:48].reshape(1, 32), ctx=cpu)
    assert e.param


@needs_torch
def test_torch_views_that_are_not_plain_memory(cpu):
    t = TORCH.zeros(4, dtype=TORCH.float32)
    refused("MLA_ERR_WRONG_DEVICE", libmla.convert, TORCH.zeros(4, device="meta"), dtype="f16",
            ctx=cpu)
    refused("MLA_ERR_STRIDE", libmla.convert, t.to_sparse(), dtype="f16", ctx=cpu)
    z = TORCH.zeros(4, dtype=TORCH.complex64).conj()
    e = refused("MLA_ERR_INVALID_ARGUMENT", libmla.convert, z, dtype="f16", ctx=cpu)
    assert "conjugated" in e.detail
    refused("MLA_ERR_DTYPE", libmla.convert, t.to(TORCH.int16), dtype="f16", ctx=cpu)


def test_closed_context_and_plan(rng):
    ctx = libmla.Context("cpu")
    plan = libmla.Plan(libmla.model_config("test-tiny"), ctx=ctx)
    ctx.close()
    e = refused("MLA_ERR_INVALID_ARGUMENT", libmla.convert, np.ones(4, np.float32),
                dtype="bf16", ctx=ctx)
    assert e.param == "ctx"
    refused("MLA_ERR_INVALID_ARGUMENT", lambda: plan.rope_site)
    ctx.close()  # twice is fine
    plan.close()


def test_calls_after_unload():
    ctx = libmla.Context("cpu")
    x = np.ones((2, 32), np.float32)
    libmla.unload()
    try:
        e = refused("MLA_ERR_INVALID_ARGUMENT", libmla.convert, x, dtype="bf16")
        assert e.param == "library" and "unloaded" in e.detail
        refused("MLA_ERR_INVALID_ARGUMENT", libmla.f32_to_bf16, 1.0)
        refused("MLA_ERR_INVALID_ARGUMENT", libmla.version)
        e = refused("MLA_ERR_INVALID_ARGUMENT", ctx.synchronize)
        del ctx  # its destructor must not call into the dropped library
    finally:
        libmla.load()
    assert libmla.version() == "%d.%d.%d" % libmla.version_info()
    assert libmla.convert(x, dtype="bf16").shape == (2, 32)
