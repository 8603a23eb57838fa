"""The layer family through the package: generated weights written and read
as safetensors, loaded by the layer loader, a prefill and decode steps of
two sequences through LayerPlan.forward on the CPU and reference backends
against the float64 layer (python/examples/mla_bound.py) within 6 sd;
mla_prepare and the indexer's prepare once each."""

import os
import sys

import numpy as np
import pytest

import libmla
from conftest import ROOT, bf16_values

sys.path.insert(0, os.path.join(ROOT, "python", "examples"))
import mla_bound  # noqa: E402

NAMES = ("q_a_proj", "q_a_layernorm", "q_b_proj", "kv_a_proj_with_mqa", "kv_a_layernorm",
         "kv_b_proj", "o_proj")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("weights")
    out = {}
    for name in ("test-tiny", "test-tiny-indexer"):
        path = str(d / (name + ".safetensors"))
        libmla.weights_generate(path, libmla.model_config(name), 0, 1, seed=7)
        out[name] = path
    return out


def test_safetensors_read_write(files, tmp_path, rng):
    f = libmla.SafetensorsFile(files["test-tiny"])
    names = f.names
    assert "model.layers.0.self_attn.kv_b_proj.weight" in names and len(f) == len(names)
    dt, shape, fdt = f.info("model.layers.0.self_attn.kv_b_proj.weight")
    assert dt == libmla.DType.BF16 and fdt == "BF16" and shape == (4 * 64, 128)
    assert f.metadata("mla.config") == "test-tiny" and f.metadata("nope") is None
    w = f.read("model.layers.0.self_attn.kv_b_proj.weight")
    assert w.dtype == np.uint16 and w.shape == shape
    wr = libmla.SafetensorsWriter()
    a = rng.standard_normal((3, 5)).astype(np.float32)
    wr.add("a", a)
    wr.add("b", w, dtype="bf16")
    wr.metadata("k", "v")
    with pytest.raises(libmla.Error) as e:
        wr.add("c", a[:, ::2])
    assert e.value.status == "MLA_ERR_STRIDE"
    wr.save(tmp_path / "x.safetensors")
    g = libmla.SafetensorsFile(tmp_path / "x.safetensors")
    assert g.names == ["a", "b"] and g.metadata("k") == "v" and "b" in g
    assert np.array_equal(g.read("a"), a) and np.array_equal(g.read("b"), w)
    out = np.zeros((3, 5), np.float32)
    assert g.read("a", out) is out and np.array_equal(out, a)
    with pytest.raises(libmla.Error) as e:
        g.read("missing")
    assert e.value.param == "missing"


def shadow(f, cfg):
    w = {}
    for n in NAMES:
        a = f.read("model.layers.0.self_attn.%s.weight" % n)
        w[n] = (bf16_values(a) if a.dtype == np.uint16 else a).astype(np.float64)
    cos, sin = libmla.rope_table(cfg, 2)
    inv = np.arctan2(sin[1], cos[1]).astype(np.float64)
    return mla_bound.ShadowMLA(w, heads=cfg.heads, nope=cfg.nope, rope=cfg.rope, v=cfg.v,
                               kv_lora=cfg.kv_lora, eps=cfg.rms_eps,
                               scale=libmla.softmax_scale(cfg), inv_freq=inv)


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_layer_prefill_and_decode(files, rng, backend):
    cfg = libmla.model_config("test-tiny")
    ctx = libmla.Context(backend)
    f = libmla.SafetensorsFile(files["test-tiny"], ctx=ctx)
    weights = libmla.LayerWeights(ctx, f, cfg, 0)
    assert weights.formats["kv_b_proj"] == libmla.WeightFormat.BF16
    sh = shadow(f, cfg)
    plan = libmla.Plan(cfg, ctx.target, ctx=ctx)
    B, bs, mb = 2, 16, 4
    cd = libmla.cache_desc(B * mb, bs, cfg.kv_lora, cfg.rope)
    cache = libmla.empty_cache(cd, ctx=ctx)
    cos, sin = libmla.rope_table(cfg)
    opt = libmla.layer_options(cfg, cd, act="f32")
    table = np.arange(B * mb, dtype=np.int32).reshape(B, mb)
    plans, worst = {}, 0.0
    for S, start in ((5, 0), (1, 5), (1, 6)):
        pos = np.tile(np.arange(start, start + S), (B, 1))
        batch = dict(positions=pos.reshape(-1).astype(np.int32),
                     slots=(np.arange(B)[:, None] * mb * bs + pos).reshape(-1).astype(np.int64),
                     block_table=table, context_lens=(pos[:, -1] + 1).astype(np.int32), next_n=S)
        lp = plans.get(S)
        if lp is None:
            lp = plans[S] = libmla.LayerPlan(plan, cd, opt, max_context=mb * bs, cos=cos,
                                             sin=sin, cache=cache, ctx=ctx, **batch)
            assert not lp.sparse
        else:
            lp.update(**batch)
        x = rng.standard_normal((B * S, cfg.hidden)).astype(np.float32)
        y = np.zeros((B * S, cfg.hidden), np.float32)
        assert lp.forward(weights, x, y) is y
        for b in range(B):
            want, sd = sh.step(b, x[b * S:(b + 1) * S], pos[b])
            z = np.abs(y[b * S:(b + 1) * S] - want) / sd
            assert np.all(z <= 6), "an error of %.2f sd" % z.max()
            worst = max(worst, z.max())
    assert worst > 0.3
    weights.close()
    with pytest.raises(libmla.Error):
        lp.forward(weights, x)  # freed weights are refused, not read
    ctx.close()


def test_prepare_and_indexer_prepare(files, cpu, rng):
    cfg = libmla.model_config("test-tiny-indexer")
    f = libmla.SafetensorsFile(files["test-tiny-indexer"], ctx=cpu)
    weights = libmla.LayerWeights(cpu, f, cfg, 0)
    plan = libmla.Plan(cfg, "cpu", ctx=cpu)
    cd = libmla.cache_desc(2, 16, cfg.kv_lora, cfg.rope)
    cache = libmla.empty_cache(cd, ctx=cpu)
    cos, sin = libmla.rope_table(cfg)
    x = rng.standard_normal((3, cfg.hidden)).astype(np.float32)
    pos = np.array([0, 1, 2], np.int32)
    q_cat = libmla.prepare(plan, weights, x, pos, pos, cos, sin, cd, cache, ctx=cpu)
    assert q_cat.shape == (3, cfg.heads, cfg.kv_lora + cfg.rope) and q_cat.dtype == np.uint16
    assert np.any(cache != 0)
    q_lat = rng.standard_normal((3, cfg.q_lora)).astype(np.float32)
    q8, w, k = libmla.indexer_prepare(cfg, weights, q_lat, x, pos, cos, sin, ctx=cpu)
    assert q8.shape == (3, cfg.index_heads, 128) and w.shape == (3, cfg.index_heads)
    assert k.shape == (3, 128) and np.all(np.isfinite(w))
