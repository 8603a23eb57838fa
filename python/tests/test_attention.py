"""The attention core through AttentionPlan: dense decode and a causal
prefill chunk on the CPU and reference backends against float64 attention
with a bound derived from the fp32 arithmetic; outputs through a strided
view; torch CPU tensors the same as NumPy."""

import numpy as np
import pytest

import libmla
from conftest import TORCH, bf16_bits, bf16_values, needs_torch

U24 = 2.0 ** -24


def problem(rng, lens, rows):
    cfg = libmla.model_config("test-tiny")
    L, R, H, bs = cfg.kv_lora, cfg.rope, cfg.heads, 16
    nb = 8
    desc = libmla.cache_desc(nb, bs, L, R)
    keys = bf16_values(bf16_bits(rng.standard_normal((nb * bs, L + R))))
    cache = libmla.empty_cache(desc, ctx=libmla.default_context())
    libmla.cache_write(desc, cache, keys[:, :L], keys[:, L:], np.arange(nb * bs))
    table = np.array([[5, 2, 7, 0], [1, 3, 4, 6]], np.int32)
    q = rng.standard_normal((sum(rows), H, L + R)).astype(np.float32)
    ad = libmla.attention_desc(cfg, desc, q_dtype="f32", out_dtype="f32")
    return cfg, desc, cache, keys, table, np.array(lens, np.int32), q, ad


def attention_f64(keys, table, lens, rows, q, scale, bs=16, L=128):
    """Causal MLA attention in float64, and a bound of the fp32 kernels'
    error: scores off by <= Delta = (D + 2) u scale sum|q||k| each, softmax
    weights by <= 2 p Delta, outputs by <= (2 Delta + (T + 2) u) sum p |v|."""
    D = q.shape[2]
    o = np.zeros((q.shape[0], q.shape[1], L))
    bound = np.zeros_like(o)
    r0 = 0
    for s, (c, n) in enumerate(zip(lens, rows)):
        k = keys[[table[s, t // bs] * bs + t % bs for t in range(c)]].astype(np.float64)
        for j in range(n):
            p_pos = c - n + j
            kk = k[:p_pos + 1]
            qq = q[r0 + j].astype(np.float64)
            sc = scale * qq @ kk.T
            p = np.exp(sc - sc.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            o[r0 + j] = p @ kk[:, :L]
            delta = ((D + 2) * U24 * scale * np.abs(qq) @ np.abs(kk).T).max(1, keepdims=True)
            bound[r0 + j] = (2 * delta + (len(kk) + 2) * U24) * (p @ np.abs(kk[:, :L]))
        r0 += n
    return o, bound + 1e-30


@pytest.mark.parametrize("rows", [[1, 1], [3, 2]])
def test_attention_against_float64(cpu, ref, rng, rows):
    lens = [40, 57]
    cfg, desc, cache, keys, table, lens, q, ad = problem(rng, lens, rows)
    cu = np.concatenate([[0], np.cumsum(rows)]).astype(np.int32)
    want, bound = attention_f64(keys, table, lens, rows, q, ad.softmax_scale)
    for ctx in (cpu, ref):
        plan = libmla.AttentionPlan(ad, q, cache, table, lens, cu_q_lens=cu, ctx=ctx)
        assert plan.workspace_bytes >= 0 and plan.splits >= 1
        o, lse = plan.run(q, cache, table, lens, cu_q_lens=cu, return_lse=True)
        assert o.shape == want.shape and lse.shape == (sum(rows), cfg.heads)
        assert np.all(np.abs(o - want) <= bound)
        # into a [H, T, L] buffer through a [T, H, L] view
        buf = np.zeros((cfg.heads, sum(rows), cfg.kv_lora), np.float32)
        got = plan.run(q, cache, table, lens, buf.transpose(1, 0, 2), cu_q_lens=cu)
        assert got.base is buf and np.array_equal(got, o)
        plan.update(q, cache, table, lens, cu_q_lens=cu)
        plan.close()


@needs_torch
def test_attention_torch_cpu_equals_numpy(cpu, rng):
    cfg, desc, cache, keys, table, lens, q, ad = problem(rng, [40, 57], [1, 1])
    plan = libmla.AttentionPlan(ad, q, cache, table, lens, ctx=cpu)
    o_np = plan.run(q, cache, table, lens)
    t = TORCH.from_numpy
    tp = libmla.AttentionPlan(ad, t(q), t(cache), t(table), t(lens), ctx=cpu)
    o_t = tp.run(t(q), t(cache), t(table), t(lens))
    assert isinstance(o_t, TORCH.Tensor) and np.array_equal(o_t.numpy(), o_np)
    out = TORCH.zeros_like(o_t)
    assert tp.run(t(q), t(cache), t(table), t(lens), out) is out
    assert TORCH.equal(out, o_t)
