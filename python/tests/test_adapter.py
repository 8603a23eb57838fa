"""The Hugging Face adapter's math without transformers: a transliteration
of DeepseekV3Attention's forward (float64, its own KV cache) is the oracle;
the adapter (python/examples/deepseek_v3_adapter.py) runs the same modules
on libmla's CPU backend over a prefill and decode steps of two sequences,
and every output must be within 6 standard deviations of its error, as
python/examples/mla_bound.py propagates them from libmla's roundings (the
criterion of docs/LAYER.md). The bound's own exact forward is checked
against the transliteration first (agreement to float64 rounding)."""

import math
import os
import sys
import types

import numpy as np
import pytest

from conftest import ROOT, bf16_bits, bf16_values

import libmla  # noqa: E402

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(ROOT, "python", "examples"))
import deepseek_v3_adapter as A  # noqa: E402
import mla_bound  # noqa: E402

nn = torch.nn


yarn_inv_freq = mla_bound.deepseek_inv_freq
m = mla_bound.yarn_m


class RMSNorm(nn.Module):
    def __init__(self, n, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n, dtype=torch.float64))
        self.variance_epsilon = eps

    def forward(self, x):  # HF's DeepseekV3RMSNorm
        dt = x.dtype
        x = x.to(torch.float32 if dt != torch.float64 else dt)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * x.to(dt)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), -1)


class DeepseekV3Attention(nn.Module):
    """DeepseekV3Attention's forward, transliterated (eager attention with a
    causal mask, the cache a growing concatenation)."""

    def __init__(self, c, layer_idx):
        super().__init__()
        self.config, self.layer_idx = c, layer_idx
        H, self.H = c.num_attention_heads, c.num_attention_heads
        self.nope, self.R, self.v, self.L = (c.qk_nope_head_dim, c.qk_rope_head_dim,
                                             c.v_head_dim, c.kv_lora_rank)
        qk = self.nope + self.R
        lin = lambda i, o: nn.Linear(i, o, bias=False, dtype=torch.float64)  # noqa: E731
        self.q_a_proj = lin(c.hidden_size, c.q_lora_rank)
        self.q_a_layernorm = RMSNorm(c.q_lora_rank)
        self.q_b_proj = lin(c.q_lora_rank, H * qk)
        self.kv_a_proj_with_mqa = lin(c.hidden_size, self.L + self.R)
        self.kv_a_layernorm = RMSNorm(self.L)
        self.kv_b_proj = lin(self.L, H * (self.nope + self.v))
        self.o_proj = lin(H * self.v, c.hidden_size)
        self.scaling = c.scaling
        self.past = None

    def forward(self, hidden_states, position_embeddings, attention_mask=None, **kw):
        b, s = hidden_states.shape[:2]
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(hidden_states)))
        q = q.view(b, s, -1, self.nope + self.R).transpose(1, 2)
        q_pass, q_rot = torch.split(q, [self.nope, self.R], -1)
        ckv = self.kv_a_proj_with_mqa(hidden_states)
        k_pass, k_rot = torch.split(ckv, [self.L, self.R], -1)
        k_pass = self.kv_b_proj(self.kv_a_layernorm(k_pass)).view(b, s, -1, self.nope + self.v)
        k_pass, v = torch.split(k_pass.transpose(1, 2), [self.nope, self.v], -1)
        k_rot = k_rot.view(b, 1, s, self.R)
        cos, sin = position_embeddings
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        if self.config.rope_interleave:
            q_rot = q_rot.view(b, -1, s, self.R // 2, 2).transpose(4, 3).reshape(b, -1, s, self.R)
            k_rot = k_rot.view(b, 1, s, self.R // 2, 2).transpose(4, 3).reshape(b, 1, s, self.R)
        q_rot = q_rot * cos + rotate_half(q_rot) * sin
        k_rot = k_rot * cos + rotate_half(k_rot) * sin
        k_rot = k_rot.expand(*k_pass.shape[:-1], -1)
        qs, ks = torch.cat((q_pass, q_rot), -1), torch.cat((k_pass, k_rot), -1)
        if self.past is not None:
            ks = torch.cat((self.past[0], ks), 2)
            v = torch.cat((self.past[1], v), 2)
        self.past = (ks, v)
        n = ks.shape[2]
        w = qs @ ks.transpose(2, 3) * self.scaling
        mask = torch.triu(torch.full((s, n), float("-inf"), dtype=w.dtype, device=w.device),
                          n - s + 1)
        w = torch.softmax(w + mask, -1)
        o = (w @ v).transpose(1, 2).reshape(b, s, -1)
        return self.o_proj(o), None


def make_model(interleave=True, yarn=False, layers=2, seed=0):
    c = types.SimpleNamespace(
        hidden_size=128, num_attention_heads=4, q_lora_rank=96, kv_lora_rank=128,
        qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32, max_position_embeddings=256,
        rope_theta=10000.0, rope_interleave=interleave, attention_bias=False,
        rope_scaling=None)
    inv = yarn_inv_freq(16, 10000.0, 1.0, 32, 1, 256)
    amp, c.scaling = 1.0, (32 + 16) ** -0.5
    if yarn:
        c.rope_scaling = {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32, "beta_slow": 1,
                          "original_max_position_embeddings": 64, "mscale": 1.0,
                          "mscale_all_dim": 1.0}
        inv = yarn_inv_freq(16, 10000.0, 4.0, 32, 1, 64)
        amp = m(4.0, 1.0) / m(4.0, 1.0)
        c.scaling *= m(4.0, 1.0) ** 2
    g = torch.Generator().manual_seed(seed)
    model = nn.Module()
    model.config = c
    model.layers = nn.ModuleList([DeepseekV3Attention(c, i) for i in range(layers)])
    model.model = types.SimpleNamespace(rotary_emb=types.SimpleNamespace(
        inv_freq=torch.tensor(inv), attention_scaling=amp))
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:  # bf16-exact weights, std 1/sqrt(in)
                r = torch.randn(p.shape, generator=g, dtype=torch.float64) / math.sqrt(p.shape[1])
                p.copy_(torch.from_numpy(bf16_values(bf16_bits(r.numpy())).astype(np.float64)))
            else:  # norm weights exact in float32 (the adapter passes them as f32)
                p.copy_((1 + 0.1 * torch.randn(p.shape, generator=g, dtype=torch.float64))
                        .float().double())
    return model, inv, amp


def embeddings(inv, amp, pos):
    freqs = torch.tensor(pos, dtype=torch.float64)[..., None] * torch.tensor(inv)
    emb = torch.cat((freqs, freqs), -1)
    return emb.cos() * amp, emb.sin() * amp


def shadows(model, inv, amp):
    out = []
    for a in model.layers:
        w = {n: getattr(a, n).weight.detach().numpy() for n in A.NAMES if hasattr(a, n)}
        out.append(mla_bound.ShadowMLA(
            w, heads=4, nope=32, rope=16, v=32, kv_lora=128, eps=1e-6, scale=a.scaling,
            inv_freq=inv, mscale=amp,
            style="interleaved" if model.config.rope_interleave else "neox"))
    return out


def steps(B, prefill, decode, rng):
    """(positions [B, S], hidden [B, S, 128]) per call."""
    out, n = [], 0
    for S in [prefill] + [1] * decode:
        pos = np.tile(np.arange(n, n + S), (B, 1))
        out.append((pos, rng.standard_normal((B, S, 128))))
        n += S
    return out


@pytest.mark.parametrize("interleave,yarn", [(True, False), (False, False), (True, True)])
def test_bound_oracle_is_hf_forward(interleave, yarn, rng):
    model, inv, amp = make_model(interleave, yarn)
    sh = shadows(model, inv, amp)
    for pos, x in steps(2, 5, 2, rng):
        pe = embeddings(inv, amp, pos)
        for a, s in zip(model.layers, sh):
            want, _ = a(torch.from_numpy(x), pe)
            for b in range(2):
                y, e = s.step(b, x[b], pos[b])
                ref = want[b].detach().numpy()
                assert np.max(np.abs(y - ref)) <= 1e-11 * np.max(np.abs(ref))
                assert np.all(e > 0) and np.max(e) < 0.05 * np.max(np.abs(ref))


@pytest.mark.parametrize("interleave,yarn", [(True, False), (False, False), (True, True)])
def test_adapter_within_bound(interleave, yarn, rng):
    model, inv, amp = make_model(interleave, yarn)
    sh = shadows(model, inv, amp)
    fast, _, _ = make_model(interleave, yarn)
    fast.load_state_dict(model.state_dict())
    fast = fast.float()
    fast.model.rotary_emb.inv_freq = torch.tensor(inv, dtype=torch.float32)
    session = A.patch(fast, batch=2, max_context=64, ctx=libmla.Context("cpu"))
    worst = 0.0
    for pos, x in steps(2, 5, 3, rng):
        xs = torch.from_numpy(x.astype(np.float32))
        for a, s in zip(fast.layers, sh):
            y, _ = a(xs, None, None, position_ids=torch.from_numpy(pos))
            assert y.dtype == torch.float32 and y.shape == (2, pos.shape[1], 128)
            for b in range(2):
                want, sd = s.step(b, xs[b].double().numpy(), pos[b])
                z = np.abs(y[b].numpy() - want) / sd
                assert np.all(z <= 6), "an error of %.2f sd" % np.max(z)
                worst = max(worst, float(np.max(z)))
    assert worst > 0.5  # the errors are the roundings the sd describes, not far below
    session.reset()
    with pytest.raises(ValueError):  # positions the session does not hold
        fast.layers[0](xs, None, None, position_ids=torch.tensor([[7], [7]]))
    A.unpatch(fast)
