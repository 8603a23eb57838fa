"""The prepare path: RoPE (bit-exact against its formula in NumPy), RMSNorm,
the projections with strided views, the latent cache, the fused RoPE +
concat + cache write against its separate steps, and the RoPE-once plan."""

import numpy as np
import pytest

import libmla
from conftest import bf16_bits, bf16_values

U24 = 2.0 ** -24


@pytest.fixture
def cfg():
    return libmla.model_config("test-tiny")


def rope_numpy(x, pos, cos, sin, style):
    """MLA.md section 3 in fp32: each product rounded, then the sum."""
    x = x.astype(np.float32)
    half = cos.shape[1]
    c, s = cos[pos][:, None, :], sin[pos][:, None, :]
    if style == "interleaved":
        a, b = x[..., 0:2 * half:2], x[..., 1:2 * half:2]
    else:
        a, b = x[..., :half], x[..., half:2 * half]
    oa = (a * c) - (b * s)
    ob = (a * s) + (b * c)
    out = x.copy()
    if style == "interleaved":
        out[..., 0:2 * half:2], out[..., 1:2 * half:2] = oa, ob
    else:
        out[..., :half], out[..., half:2 * half] = oa, ob
    return out


@pytest.mark.parametrize("style", ["interleaved", "neox"])
def test_rope_bit_exact_and_in_place(cpu, ref, cfg, rng, style):
    cos, sin = libmla.rope_table(cfg, 64)
    assert cos.shape == (64, cfg.rope // 2) and cos[0, 0] == 1.0
    x = rng.standard_normal((5, 4, cfg.rope)).astype(np.float32)
    pos = np.array([0, 3, 17, 63, 8], np.int64)
    want = rope_numpy(x, pos, cos, sin, style)
    for ctx in (cpu, ref):
        assert np.array_equal(libmla.rope(x, pos, cos, sin, style=style, ctx=ctx), want)
    y = x.copy()
    assert libmla.rope(y, pos.astype(np.int32), cos, sin, y, style=style, ctx=cpu) is y
    assert np.array_equal(y, want)
    # a strided q_pe inside a wider q: only the view is rotated
    q = rng.standard_normal((5, 4, 48)).astype(np.float32)
    orig = q.copy()
    libmla.rope(q[:, :, 32:], pos, cos, sin, q[:, :, 32:], style=style, ctx=cpu)
    assert np.array_equal(q[:, :, :32], orig[:, :, :32])
    assert np.array_equal(q[:, :, 32:], rope_numpy(orig[:, :, 32:], pos, cos, sin, style))


def test_rmsnorm_and_fused_qk(cpu, ref, rng):
    x = rng.standard_normal((6, 128)).astype(np.float32)
    w = (1 + 0.1 * rng.standard_normal(128)).astype(np.float32)
    y = libmla.rmsnorm(x, w, 1e-6, ctx=cpu)
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 ** 2).mean(1, keepdims=True) + 1e-6) * w
    # fp32 sum of squares over D terms (any order) plus a handful of roundings
    assert np.all(np.abs(y - want) <= (128 + 8) * U24 * np.abs(want) + 1e-30)
    yr = libmla.rmsnorm(x, w, 1e-6, ctx=ref)
    assert np.all(np.abs(y - yr) <= 2 * (128 + 8) * U24 * np.abs(want))
    kv = rng.standard_normal((6, 64)).astype(np.float32)
    wk = np.ones(64, np.float32)
    q_out, q_scales, kv_out = libmla.fused_qk_rmsnorm(x, w, kv, wk, 1e-6, 1e-6, ctx=cpu)
    assert q_scales is None and np.array_equal(q_out, y)
    assert np.array_equal(kv_out, libmla.rmsnorm(kv, wk, 1e-6, ctx=cpu))
    q8, s8, _ = libmla.fused_qk_rmsnorm(x, w, kv, wk, q_dtype="fp8_e4m3fn", ctx=cpu)
    assert q8.shape == (6, 128) and s8.shape == (6, 1)
    c, s = libmla.fp8_group_quant(y, ctx=cpu)
    assert np.array_equal(q8, c) and np.array_equal(s8, s)


def test_linear_and_batched_gemm_views(cpu, ref, rng):
    x = rng.standard_normal((3, 64)).astype(np.float32)
    wb = bf16_bits(rng.standard_normal((40, 64)) / 8)
    w64 = bf16_values(wb).astype(np.float64)
    y = libmla.linear(x, libmla.bf16(wb), ctx=cpu)
    want = x.astype(np.float64) @ w64.T
    bound = (64 + 1) * U24 * (np.abs(x) @ np.abs(w64).T)
    assert y.shape == (3, 40) and np.all(np.abs(y - want) <= bound)
    assert np.all(np.abs(libmla.linear(x, libmla.bf16(wb), ctx=ref) - want) <= bound)

    # the absorb: q_nope [T, H, nope] as a [H, T, nope] view, W_kc [H, nope, L],
    # output through a [H, T, L] view of a [T, H, L] buffer (no copies)
    T_, H, nope, L = 5, 4, 32, 48
    q = rng.standard_normal((T_, H, nope)).astype(np.float32)
    wkc = bf16_bits(rng.standard_normal((H, nope, L)) / 6)
    out = np.zeros((T_, H, L), np.float32)
    got = libmla.batched_gemm(q.transpose(1, 0, 2), libmla.bf16(wkc), 1.0,
                              out.transpose(1, 0, 2), ctx=cpu)
    assert got.base is out
    w64 = bf16_values(wkc).astype(np.float64)
    want = np.einsum("thn,hnl->thl", q.astype(np.float64), w64)
    bound = (nope + 1) * U24 * np.einsum("thn,hnl->thl", np.abs(q), np.abs(w64))
    assert np.all(np.abs(out - want) <= bound)


@pytest.mark.parametrize("dtype", ["bf16", "fp8_e4m3fn"])
def test_cache_write_gather(cpu, ref, cfg, rng, dtype):
    desc = libmla.cache_desc(6, 16, cfg.kv_lora, cfg.rope, dtype=dtype, k_scale=0.5)
    assert libmla.cache_block_bytes(desc) == 16 * (cfg.kv_lora + cfg.rope) * (
        2 if dtype == "bf16" else 1)
    k_nope = rng.standard_normal((7, cfg.kv_lora)).astype(np.float32)
    k_pe = rng.standard_normal((7, cfg.rope)).astype(np.float32)
    slots = np.array([0, 5, 16, 17, -1, 40, 95], np.int64)
    caches = []
    for ctx in (cpu, ref):
        cache = libmla.empty_cache(desc, ctx=ctx)
        libmla.cache_write(desc, cache, k_nope, k_pe, slots, ctx=ctx)
        caches.append(cache)
    assert np.array_equal(caches[0], caches[1])  # byte-identical on every backend
    table = np.array([[0, 1, 2, 3, 4, 5]], np.int32)
    rows = libmla.cache_gather(desc, caches[0], table, np.array([96], np.int32), ctx=cpu)
    assert rows.shape == (96, cfg.kv_lora + cfg.rope)
    keep = slots >= 0
    got = rows[slots[keep]]
    full = np.concatenate([k_nope, k_pe], 1)[keep]
    if dtype == "bf16":
        assert np.array_equal(got, bf16_values(bf16_bits(full)))
    else:
        codes = [[libmla.f32_to_fp8(float(v) / 0.5) for v in r] for r in full]
        want = np.array([[libmla.fp8_to_f32(c) * 0.5 for c in r] for r in codes], np.float32)
        assert np.array_equal(got, want)


def test_fused_rope_cache_equals_its_steps(cpu, cfg, rng):
    cos, sin = libmla.rope_table(cfg, 64)
    T_, H, L, R = 3, cfg.heads, cfg.kv_lora, cfg.rope
    desc = libmla.cache_desc(4, 16, L, R)
    q_nope = rng.standard_normal((T_, H, L)).astype(np.float32)
    q_pe = rng.standard_normal((T_, H, R)).astype(np.float32)
    k_nope = rng.standard_normal((T_ + 1, L)).astype(np.float32)
    k_pe = rng.standard_normal((T_ + 1, R)).astype(np.float32)
    q_pos = np.array([4, 5, 6], np.int32)
    k_pos = np.array([3, 4, 5, 6], np.int32)
    slots = np.array([3, 4, 5, 6], np.int32)
    cache = libmla.empty_cache(desc, ctx=cpu)
    q_cat, _ = libmla.fused_rope_concat_cache(
        cos=cos, sin=sin, q_nope=q_nope, q_pe=q_pe, q_pos=q_pos, k_nope=k_nope, k_pe=k_pe,
        k_pos=k_pos, slots=slots, cache_desc=desc, cache=cache, ctx=cpu)
    assert q_cat.shape == (T_, H, L + R) and q_cat.dtype == np.uint16
    assert np.array_equal(q_cat[..., :L], bf16_bits(q_nope))
    assert np.array_equal(q_cat[..., L:], bf16_bits(libmla.rope(q_pe, q_pos, cos, sin, ctx=cpu)))
    sep = libmla.empty_cache(desc, ctx=cpu)
    rk = libmla.rope(k_pe[:, None, :], k_pos, cos, sin, ctx=cpu)[:, 0, :]
    libmla.cache_write(desc, sep, k_nope, rk, slots, ctx=cpu)
    assert np.array_equal(cache, sep)  # rotated once, at one site


def test_rope_once_plan(cfg):
    plan = libmla.Plan(cfg, "cpu")
    site = plan.rope_site
    assert sum(plan.rotates_at(s) for s in libmla.RopeSite) == 1 and plan.rotates_at(site)
    assert "rmsnorm" in plan.kernel("qk_norm")
    assert plan.config.heads == cfg.heads and plan.options.q_dtype == libmla.DType.BF16
    forced = libmla.Plan(cfg, "cpu", force_rope_site="attention")
    assert forced.rope_site == libmla.RopeSite.ATTENTION
    assert forced.workspace_bytes(4) > 0
    assert "test-tiny" in libmla.model_config_presets()
    with pytest.raises(libmla.Error):
        libmla.model_config("no-such-model")
