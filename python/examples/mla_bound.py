"""MLA attention in float64, and the standard deviation of a computed
forward's error, source by source.

``ShadowMLA`` runs one DeepSeek attention layer exactly (float64, the
absorbed form, equal to Hugging Face's non-absorbed DeepseekV3Attention in
exact arithmetic; python/tests/test_adapter.py checks the two agree), with
its own latent cache per sequence. Alongside, it gives the first-order
sensitivity of each output y to every rounding libmla makes, each rounding
an independent error (Higham and Mary's probabilistic model, as in
docs/LAYER.md):

* q_cat (bf16): element q_hd rounds with sd u |q_hd| (u = 2^-8), plus the
  fp32 error of the chain that made it (worst-case first-order bound, used as
  an sd: projections, RMSNorm, the absorb, RoPE);
* a cached latent row (bf16): element k_td with sd u |k_td| plus its chain;
  one source per cached element, shared by every later query of the layer;
* fp32 accumulations: a K-term dot product with sd 2^-24 sqrt(K) sum|a b|
  (scores, the softmax-weighted sum, W_vc, o_proj), independent per output.

Sensitivities (row r, head h, keys t, probabilities p, values v = k[:L],
o_h = sum_t p_t v_t, G_h = W_o[:, h] W_vc[h]^T the map from head h's o to y):
  dy/dq_hd   = G_h scale sum_t p_t (k_td - kbar_d) v_t
  dy/dk_td   = sum_h G_h (scale p_t q_hd (v_t - o_h) + p_t e_d [d < L])
  dy/ds_ht   = p_t G_h (v_t - o_h)
``step`` returns y, its sd, and (for the logits' bound of
python/examples/hf_decode_check.py) the rows' source matrices.
"""

import functools

import numpy as np

ULP32 = 2.0 ** -24
U_BF16 = 2.0 ** -8


_es = functools.partial(np.einsum, optimize=True)


def _linear(W, x, e_x):
    """y = W x and a worst-case bound of its fp32 error (chain errors e_x)."""
    aw = np.abs(W)
    return x @ W.T, e_x @ aw.T + W.shape[1] * ULP32 * (np.abs(x) @ aw.T)


def _rmsnorm(x, e_x, w, eps):
    D = x.shape[-1]
    r = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    y = x * r * w
    coupling = np.abs(x) * r * r * (np.abs(x) * e_x).sum(-1, keepdims=True) / D
    return y, np.abs(w) * r * (e_x + coupling) + (D / 2 + 4) * ULP32 * np.abs(y)


def _rope(x, e_x, theta, mscale, style, table_abs):
    R = x.shape[-1]
    if style == "interleaved":
        ia, ib = np.arange(0, R, 2), np.arange(1, R, 2)
    else:
        ia, ib = np.arange(R // 2), np.arange(R // 2, R)
    c, s = mscale * np.cos(theta), mscale * np.sin(theta)
    et = mscale * table_abs(theta)
    a, b, ea, eb = x[..., ia], x[..., ib], e_x[..., ia], e_x[..., ib]
    y, e = np.empty_like(x), np.empty_like(x)
    y[..., ia] = a * c - b * s
    y[..., ib] = a * s + b * c
    common = et * (np.abs(a) + np.abs(b))
    e[..., ia] = ea * np.abs(c) + eb * np.abs(s) + common + 2 * ULP32 * (np.abs(a * c) +
                                                                           np.abs(b * s))
    e[..., ib] = ea * np.abs(s) + eb * np.abs(c) + common + 2 * ULP32 * (np.abs(a * s) +
                                                                           np.abs(b * c))
    return y, e


def deepseek_inv_freq(R, base, factor=1.0, beta_fast=32.0, beta_slow=1.0, orig=4096):
    """The RoPE frequencies of MLA.md section 3 (DeepSeek's YaRN when
    factor > 1), in float64."""
    f = base ** (-np.arange(0, R, 2, dtype=np.float64) / R)
    if factor <= 1:
        return f

    def corr(r):
        return R * np.log(orig / (2 * np.pi * r)) / (2 * np.log(base))
    low = max(np.floor(corr(beta_fast)), 0)
    high = min(np.ceil(corr(beta_slow)), R - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(R // 2) - low) / (high - low), 0, 1)
    return f / factor * ramp + f * (1 - ramp)


def yarn_m(s, k):
    """m(s, k) = 0.1 k ln(s) + 1 (1 when s <= 1)."""
    return 0.1 * k * np.log(s) + 1 if s > 1 else 1.0


def libmla_table(theta):
    """libmla's cos/sin: the float64 values rounded once to fp32."""
    return ULP32 * np.ones_like(theta)


class ShadowMLA:
    """One attention layer in float64 over sequences that grow step by step.

    Args:
        w: float64 arrays by Hugging Face's names (q_a_proj, q_a_layernorm,
            q_b_proj or q_proj, kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj,
            o_proj), projections [out, in].
        heads, nope, rope, v, kv_lora; eps (the norms'); scale (softmax);
        inv_freq [R/2] and mscale (the exact angles pos * inv_freq, the
        cos/sin factor); style: "interleaved" or "neox"; u: the unit
        roundoff of q_cat and the cache (bf16).
    """

    def __init__(self, w, *, heads, nope, rope, v, kv_lora, eps, scale, inv_freq, mscale=1.0,
                 style="interleaved", u=U_BF16, table_abs=libmla_table):
        self.w, self.H, self.nope, self.R, self.v, self.L = w, heads, nope, rope, v, kv_lora
        self.eps, self.scale, self.style, self.u = eps, scale, style, u
        self.inv_freq, self.mscale, self.table_abs = np.asarray(inv_freq, np.float64), mscale, \
            table_abs
        kvb = w["kv_b_proj"].reshape(heads, nope + v, kv_lora)
        self.w_kc = kvb[:, :nope, :]                      # [H, nope, L]
        self.w_vc = kvb[:, nope:, :].transpose(0, 2, 1)   # [H, L, v]
        wo = w["o_proj"].reshape(-1, heads, v)            # [hidden, H, v]
        self.G = _es("yhv,hlv->hyl", wo, self.w_vc)  # [H, hidden, L]
        self.seqs = {}

    def reset(self):
        self.seqs = {}

    def _q_k(self, x, pos):
        """q_cat [T, H, D] and the latent rows [T, D], exact, with the sd of
        their computed values (bf16 rounding and the fp32 chain)."""
        w, H = self.w, self.H
        zero = np.zeros_like(x)
        if "q_a_proj" in w:
            ql, e = _linear(w["q_a_proj"], x, zero)
            qn, e = _rmsnorm(ql, e, w["q_a_layernorm"], self.eps)
            q, e = _linear(w["q_b_proj"], qn, e)
        else:
            q, e = _linear(w["q_proj"], x, zero)
        T = x.shape[0]
        q, e = q.reshape(T, H, -1), e.reshape(T, H, -1)
        q_nope, q_pe, e_nope, e_pe = q[..., :self.nope], q[..., self.nope:], \
            e[..., :self.nope], e[..., self.nope:]
        akc = np.abs(self.w_kc)
        q_lat = _es("thn,hnl->thl", q_nope, self.w_kc)
        e_lat = (_es("thn,hnl->thl", e_nope, akc) +
                 self.nope * ULP32 * _es("thn,hnl->thl", np.abs(q_nope), akc))
        theta = pos[:, None] * self.inv_freq[None, :]
        q_rot, e_rot = _rope(q_pe, e_pe, theta[:, None, :], self.mscale, self.style,
                             self.table_abs)
        q_cat = np.concatenate([q_lat, q_rot], -1)
        sd_q = np.hypot(np.concatenate([e_lat, e_rot], -1), self.u * np.abs(q_cat))
        kv, e = _linear(w["kv_a_proj_with_mqa"], x, zero)
        k_lat, e_klat = _rmsnorm(kv[:, :self.L], e[:, :self.L], w["kv_a_layernorm"], self.eps)
        k_rot, e_krot = _rope(kv[:, self.L:], e[:, self.L:], theta, self.mscale, self.style,
                              self.table_abs)
        k = np.concatenate([k_lat, k_rot], -1)
        sd_k = np.hypot(np.concatenate([e_klat, e_krot], -1), self.u * np.abs(k))
        return q_cat, sd_q, k, sd_k

    def step(self, seq, x, pos, sources=False):
        """New tokens of sequence ``seq``: x [S, hidden] at positions pos [S]
        (after every earlier one). Returns (y [S, hidden] exact, sd [S, hidden]
        of a computed y's error), plus with ``sources`` one dict a row:
        "q": [hidden, H*D] (this row's q_cat sources, scaled by their sd),
        "k": [hidden, n*D] (the sources of the sequence's first n cached
        elements, shared with other rows), "own": [hidden] (the variance of
        this row's fp32 accumulations)."""
        x, pos = np.asarray(x, np.float64), np.asarray(pos, np.float64)
        state = self.seqs.setdefault(seq, {"k": [], "sd": []})
        q, sd_q, k, sd_k = self._q_k(x, pos)
        state["k"].append(k)
        state["sd"].append(sd_k)
        K, SK = np.concatenate(state["k"]), np.concatenate(state["sd"])
        first = K.shape[0] - x.shape[0]
        ys, sds, srcs = [], [], []
        for r in range(x.shape[0]):
            y, sd, src = self._row(q[r], sd_q[r], K[:first + r + 1], SK[:first + r + 1])
            ys.append(y)
            sds.append(sd)
            srcs.append(src)
        y, sd = np.stack(ys), np.stack(sds)
        return (y, sd, srcs) if sources else (y, sd)

    def _row(self, q, sd_q, K, SK):
        L, D, n = self.L, K.shape[1], K.shape[0]
        V = K[:, :L]
        s = self.scale * q @ K.T                                  # [H, n]
        p = np.exp(s - s.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        o = p @ V                                                 # [H, L]
        kbar = p @ K                                              # [H, D]
        # dy/dq: G_h scale sum_t p_t v_t (k_t - kbar)^T
        C = self.scale * _es("ht,tl,htd->hld", p, V, K[None] - kbar[:, None])
        Jq = _es("hyl,hld->yhd", self.G, C) * sd_q[None]    # [hidden, H, D]
        g = _es("hyl,htl->hty", self.G, V[None] - o[:, None])  # [H, n, hidden]
        Jk = self.scale * _es("ht,hd,hty->ytd", p, q, g)
        Jk[:, :, :L] += _es("ht,hyl->ytl", p, self.G)
        Jk *= SK[None]
        # fp32 noise: scores, the weighted sum, W_vc, o_proj (independent)
        aK = np.abs(K)
        sd_s = self.scale * ULP32 * np.sqrt(D) * (np.abs(q) @ aK.T)  # [H, n]
        var = _es("hty,ht->y", (p[..., None] * g) ** 2, sd_s ** 2)
        sd_o = ULP32 * np.sqrt(n) * (p @ aK[:, :L])               # [H, L]
        var += _es("hyl,hl->y", self.G ** 2, sd_o ** 2)
        ov = _es("hl,hlv->hv", o, self.w_vc)
        sd_ov = ULP32 * np.sqrt(L) * _es("hl,hlv->hv", np.abs(o), np.abs(self.w_vc))
        wo = self.w["o_proj"]
        var += (wo ** 2) @ (sd_ov.reshape(-1) ** 2)
        var += (ULP32 * np.sqrt(wo.shape[1]) * (np.abs(wo) @ np.abs(ov.reshape(-1)))) ** 2
        y = wo @ ov.reshape(-1)
        Jq, Jk = Jq.reshape(Jq.shape[0], -1), Jk.reshape(Jk.shape[0], -1)
        sd = np.sqrt((Jq ** 2).sum(1) + (Jk ** 2).sum(1) + var)
        return y, sd, {"q": Jq, "k": Jk, "own": var}
