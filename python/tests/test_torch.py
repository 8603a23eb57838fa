"""PyTorch tensors on the CPU: dtype mapping (fp8 as torch.float8_* where
torch has it, uint8 codes otherwise), zero-copy outputs and views, DLPack
objects; on torch >= 2.4 the custom ops (schema, fake implementation,
torch.compile without graph breaks), on older torch the plain path."""

import numpy as np
import pytest

import libmla
from conftest import TORCH, DLPackOnly, needs_torch

pytestmark = needs_torch
torch = TORCH


def new_torch():
    return torch is not None and hasattr(torch, "library") and hasattr(torch.library,
                                                                      "custom_op")


def test_dtypes_and_zero_copy(cpu):
    x = torch.randn(4, 64)
    b = libmla.convert(x, dtype="bf16", ctx=cpu)
    assert b.dtype == torch.bfloat16 and torch.equal(b, x.bfloat16())
    out = torch.empty(4, 64, dtype=torch.float16)
    ptr = out.data_ptr()
    assert libmla.convert(x, out, ctx=cpu) is out and out.data_ptr() == ptr
    assert torch.equal(out, x.half())
    codes, scales = libmla.fp8_group_quant(x, group=64, ctx=cpu)
    want = torch.float8_e4m3fn if hasattr(torch, "float8_e4m3fn") else torch.uint8
    assert codes.dtype == want and scales.dtype == torch.float32
    back = libmla.fp8_group_dequant(codes, scales, group=64, ctx=cpu)
    ref = libmla.fp8_group_dequant(codes.view(torch.uint8).numpy(), scales.numpy(), group=64,
                                   ctx=cpu)
    assert np.array_equal(back.numpy(), ref)
    # a transposed torch view as output, a strided one as input
    big = torch.zeros(64, 8)
    xt = x.bfloat16()[:, ::2].t()  # [32, 4], strides (2, 64)
    assert libmla.convert(xt, big[::2, :4], ctx=cpu).data_ptr() == big.data_ptr()
    assert torch.equal(big[::2, :4], xt.float())
    assert big[1::2].abs().sum() == 0 and big[:, 4:].abs().sum() == 0


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fnuz") if torch else True,
                    reason="torch has no float8_e4m3fnuz")
def test_fp8_flavours_from_torch(cpu):
    x = torch.randn(2, 128)
    for dt, name in ((torch.float8_e4m3fn, "e4m3fn"), (torch.float8_e4m3fnuz, "e4m3fnuz")):
        c, s = libmla.fp8_group_quant(x, fp8=name, ctx=cpu)
        assert c.dtype == dt
        y = libmla.fp8_group_dequant(c, s, ctx=cpu)  # the flavour comes from the dtype
        assert torch.allclose(y, x, rtol=0.07, atol=0)


def test_dlpack_objects(cpu):
    x = torch.randn(3, 32)
    y = torch.zeros(3, 32, dtype=torch.float16)
    libmla.convert(DLPackOnly(x), DLPackOnly(y), ctx=cpu)
    assert torch.equal(y, x.half())


def attention_problem(ctx):
    cfg = libmla.model_config("test-tiny")
    cd = libmla.cache_desc(4, 16, cfg.kv_lora, cfg.rope)
    cache = torch.from_numpy(libmla.empty_cache(cd, ctx=ctx))
    g = torch.Generator().manual_seed(3)
    rows = torch.randn(64, cfg.kv_lora + cfg.rope, generator=g)
    libmla.cache_write(cd, cache, rows[:, :cfg.kv_lora], rows[:, cfg.kv_lora:],
                       torch.arange(64), ctx=ctx)
    table = torch.tensor([[0, 1], [2, 3]], dtype=torch.int32)
    lens = torch.tensor([20, 31], dtype=torch.int32)
    q = torch.randn(2, cfg.heads, cfg.kv_lora + cfg.rope, generator=g).bfloat16()
    desc = libmla.attention_desc(cfg, cd, out_dtype="f32")
    return desc, q, cache, table, lens


@pytest.mark.skipif(new_torch(), reason="torch >= 2.4 takes the custom-op path")
def test_old_torch_plain_path(cpu):
    from libmla import torch_ops
    desc, q, cache, table, lens = attention_problem(cpu)
    plan = libmla.AttentionPlan(desc, q, cache, table, lens, ctx=cpu)
    assert not torch_ops.enabled()
    assert plan.run(q, cache, table, lens).shape == (2, 4, 128)


@pytest.mark.skipif(not new_torch(), reason="torch < 2.4 has no torch.library.custom_op")
def test_custom_ops_compile(cpu):
    from libmla import torch_ops
    desc, q, cache, table, lens = attention_problem(cpu)
    plan = libmla.AttentionPlan(desc, q, cache, table, lens, ctx=cpu)
    eager = plan.run(q, cache, table, lens)
    assert torch_ops.enabled() and hasattr(torch.ops.libmla, "attention_run")
    o = torch.empty_like(eager)
    torch.library.opcheck(torch.ops.libmla.attention_run.default,
                          (plan.id, q, cache, table, lens, None, None, None, o, None),
                          test_utils=("test_schema", "test_faketensor"))

    def step(q):
        return plan.run(q, cache, table, lens) * 2

    compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
    assert torch.equal(compiled(q), eager * 2)
