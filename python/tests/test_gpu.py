"""The HIP backend from Python with torch GPU tensors (skips without a GPU):
results equal to the CPU backend's where the formats define the bits and
within the float64 bounds elsewhere, the context following torch's current
stream, wrong-device refusals, __cuda_array_interface__ and DLPack objects,
and a decode step (attention run, layer forward) captured in a CUDA/HIP graph
and compiled by torch.compile."""

import os
import sys

import numpy as np
import pytest

import libmla
from conftest import ROOT, TORCH, DLPackOnly, bf16_values, needs_torch_gpu

pytestmark = needs_torch_gpu
torch = TORCH
sys.path.insert(0, os.path.join(ROOT, "python", "examples"))


@pytest.fixture
def gpu():
    with libmla.Context("hip", device=0) as ctx:
        yield ctx


def test_formats_bit_exact_with_cpu(gpu, cpu):
    x = torch.randn(64, 256, device="cuda")
    c, s = libmla.mxfp4_quant(x, ctx=gpu)
    assert c.is_cuda and c.dtype == torch.uint8
    c2, s2 = libmla.mxfp4_quant(x.cpu(), ctx=cpu)
    assert torch.equal(c.cpu(), c2) and torch.equal(s.cpu(), s2)
    b = libmla.convert(x, dtype="bf16", ctx=gpu)
    assert b.dtype == torch.bfloat16 and torch.equal(b, x.bfloat16())
    q, qs = libmla.fp8_group_quant(x, ctx=gpu)
    q2, qs2 = libmla.fp8_group_quant(x.cpu(), ctx=cpu)
    assert torch.equal(q.cpu().view(torch.uint8), q2.view(torch.uint8))
    assert torch.equal(qs.cpu(), qs2)


def test_default_context_and_streams():
    x = torch.randn(8, 64, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = libmla.convert(x, dtype="f16")  # the default HIP context of cuda:0
    ctx = libmla.default_context(0)
    assert ctx.backend == libmla.Backend.HIP and ctx.stream == s.cuda_stream
    s.synchronize()
    assert torch.equal(y, x.half())
    libmla.convert(x, dtype="f16")
    assert ctx.stream == (torch.cuda.current_stream().cuda_stream or None)
    own = libmla.Context("hip")
    own.stream = s
    assert own.stream == s.cuda_stream and not own.follow_torch_stream
    own.close()


def test_wrong_device(gpu, cpu):
    with pytest.raises(libmla.Error) as e:
        libmla.convert(torch.randn(4), dtype="f16", ctx=gpu)
    assert e.value.status == "MLA_ERR_WRONG_DEVICE" and e.value.param == "x"
    out = torch.full((4,), 3.0, device="cuda")
    with pytest.raises(libmla.Error) as e:
        libmla.convert(torch.randn(4), out, ctx=gpu)
    assert e.value.status == "MLA_ERR_WRONG_DEVICE"
    with pytest.raises(libmla.Error) as e:
        libmla.convert(torch.randn(4, device="cuda"), dtype="f16", ctx=cpu)
    assert e.value.status == "MLA_ERR_WRONG_DEVICE"
    assert torch.all(out == 3)
    if torch.cuda.device_count() > 1:
        with pytest.raises(libmla.Error) as e:
            libmla.convert(torch.randn(4, device="cuda:1"), dtype="f16", ctx=gpu)
        assert e.value.status == "MLA_ERR_WRONG_DEVICE" and "GPU 1" in e.value.detail


def test_cuda_array_interface_and_dlpack(gpu):
    class CAI:
        def __init__(self, t):
            self.t = t
            self.__cuda_array_interface__ = t.__cuda_array_interface__

    x = torch.randn(4, 64, device="cuda")
    y = torch.zeros(4, 64, device="cuda", dtype=torch.float16)
    libmla.convert(CAI(x), CAI(y), ctx=gpu)
    gpu.synchronize()
    assert torch.equal(y, x.half())
    z = torch.zeros(4, 64, device="cuda", dtype=torch.float16)
    libmla.convert(DLPackOnly(x), DLPackOnly(z), ctx=gpu)
    gpu.synchronize()
    assert torch.equal(z, y)
    d = libmla.mxfp4_quant(CAI(x), ctx=gpu)[0]  # no torch tensor to copy: still torch
    assert isinstance(d, torch.Tensor) and d.is_cuda


def decode_problem(ctx, cfg, rows=4, seqs=4, block=16, blocks=8):
    L, R = cfg.kv_lora, cfg.rope
    cd = libmla.cache_desc(seqs * blocks, block, L, R)
    g = torch.Generator(device="cuda").manual_seed(5)
    keys = torch.randn(seqs * blocks * block, L + R, device="cuda", generator=g)
    cache = torch.zeros((cd.num_blocks, libmla.cache_block_bytes(cd)), dtype=torch.uint8,
                        device="cuda")
    libmla.cache_write(cd, cache, keys[:, :L], keys[:, L:],
                       torch.arange(keys.shape[0], device="cuda"), ctx=ctx)
    table = torch.arange(seqs * blocks, dtype=torch.int32, device="cuda").view(seqs, blocks)
    lens = torch.tensor([100, 17, 128, 64][:seqs], dtype=torch.int32, device="cuda")
    q = torch.randn(rows, cfg.heads, L + R, device="cuda", generator=g).bfloat16()
    return cd, cache, table, lens, q


def test_attention_equal_to_cpu_within_bound(gpu, cpu):
    from test_attention import attention_f64
    cfg = libmla.model_config("DeepSeek-V2-Lite")
    cd, cache, table, lens, q = decode_problem(gpu, cfg)
    desc = libmla.attention_desc(cfg, cd, out_dtype="f32")
    plan = libmla.AttentionPlan(desc, q, cache, table, lens, ctx=gpu)
    o = plan.run(q, cache, table, lens)
    torch.cuda.synchronize()
    keys = cache.view(cd.num_blocks * cd.block_size, -1).view(torch.bfloat16).float().cpu()
    want, bound = attention_f64(keys.numpy(), table.cpu().numpy(), lens.cpu().numpy(),
                                [1] * 4, q.float().cpu().numpy(), desc.softmax_scale, bs=16,
                                L=cfg.kv_lora)
    assert np.all(np.abs(o.cpu().numpy() - want) <= bound)


def test_attention_graph_capture_and_compile(gpu):
    cfg = libmla.model_config("DeepSeek-V2-Lite")
    cd, cache, table, lens, q = decode_problem(gpu, cfg)
    desc = libmla.attention_desc(cfg, cd, out_dtype="bf16")
    plan = libmla.AttentionPlan(desc, q, cache, table, lens, ctx=gpu)
    eager = plan.run(q, cache, table, lens)
    o = torch.empty_like(eager)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        plan.run(q, cache, table, lens, o)  # warm-up on the capture's side stream
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plan.run(q, cache, table, lens, o)
    o.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(o, eager)
    from libmla import torch_ops
    if torch_ops.enabled():
        step = torch.compile(lambda q: plan.run(q, cache, table, lens), fullgraph=True)
        assert torch.equal(step(q), eager)


def test_layer_forward_on_gpu_graph(gpu, tmp_path):
    import mla_bound
    cfg = libmla.model_config("test-tiny")
    path = str(tmp_path / "w.safetensors")
    libmla.weights_generate(path, cfg, 0, 1, seed=11)
    f = libmla.SafetensorsFile(path, ctx=gpu)
    weights = libmla.LayerWeights(gpu, f, cfg, 0)
    w = {}
    for n in ("q_a_proj", "q_a_layernorm", "q_b_proj", "kv_a_proj_with_mqa", "kv_a_layernorm",
              "kv_b_proj", "o_proj"):
        a = f.read("model.layers.0.self_attn.%s.weight" % n, ctx=libmla.default_context())
        w[n] = (bf16_values(a) if a.dtype == np.uint16 else a).astype(np.float64)
    cos, sin = libmla.rope_table(cfg, 2)
    sh = mla_bound.ShadowMLA(w, heads=cfg.heads, nope=cfg.nope, rope=cfg.rope, v=cfg.v,
                             kv_lora=cfg.kv_lora, eps=cfg.rms_eps,
                             scale=libmla.softmax_scale(cfg),
                             inv_freq=np.arctan2(sin[1], cos[1]).astype(np.float64))
    plan = libmla.Plan(cfg, gpu.target, ctx=gpu)
    cd = libmla.cache_desc(4, 16, cfg.kv_lora, cfg.rope)
    cache = torch.zeros((4, libmla.cache_block_bytes(cd)), dtype=torch.uint8, device="cuda")
    cos_t, sin_t = (torch.from_numpy(t).cuda() for t in libmla.rope_table(cfg))
    opt = libmla.layer_options(cfg, cd, act="f32")
    dev = dict(device="cuda", dtype=torch.int32)
    x0 = torch.randn(1, cfg.hidden, device="cuda")
    lp = libmla.LayerPlan(plan, cd, opt, positions=torch.tensor([0], **dev),
                          slots=torch.tensor([0], **dev), block_table=torch.arange(4, **dev)[None],
                          context_lens=torch.tensor([1], **dev), max_context=64, cos=cos_t,
                          sin=sin_t, cache=cache, ctx=gpu)
    y = torch.empty(1, cfg.hidden, device="cuda")
    for p in range(3):
        if p:
            lp.update(torch.tensor([p], **dev), torch.tensor([p], **dev),
                      torch.arange(4, **dev)[None], torch.tensor([p + 1], **dev))
        x = x0 * (p + 1)
        lp.forward(weights, x, y)
        torch.cuda.synchronize()
        want, sd = sh.step(0, x.double().cpu().numpy(), [p])
        assert np.all(np.abs(y.cpu().numpy() - want) <= 6 * sd)
    # the same step again, captured: the forward of a dense plan never waits
    lp.update(torch.tensor([3], **dev), torch.tensor([3], **dev), torch.arange(4, **dev)[None],
              torch.tensor([4], **dev))
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        lp.forward(weights, x0 * 4, y)
    torch.cuda.current_stream().wait_stream(s)
    eager = y.clone()
    with torch.cuda.graph(g):
        lp.forward(weights, x0 * 4, y)
    y.zero_()
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(y, eager)
