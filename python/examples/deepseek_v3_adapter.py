"""Hugging Face transformers' DeepseekV3Attention running on libmla.

``patch(model)`` replaces the forward of every DeepseekV3Attention of a
DeepseekV3 model by libmla's whole-layer forward (include/mla/mla_layer.h):
the absorbed MLA with the paged latent cache that libmla keeps (one per
layer, bf16, 576 values a token at DeepSeek-V3 sizes instead of HF's
per-head keys and values). The rest of the model stays Hugging Face's.

    import libmla, deepseek_v3_adapter as A
    session = A.patch(model, batch=2, max_context=256)
    logits = model(input_ids, use_cache=False).logits   # prefill
    ...                                                 # decode: next ids only
    session.reset()                                     # a new generation

How it maps (MLA.md section 2): the module's weights are written once to a
safetensors file with DeepSeek's names and loaded by mla_layer_weights_load
(bf16 projections: bf16-exact weights are taken exactly; the norms' weights
in f32). RoPE: HF's ``rope_interleave`` (the default) rotates the pairs
(x[2i], x[2i+1]) and stores them de-interleaved; libmla's interleaved RoPE
rotates the same pairs in place, so every q.k is the same. Without
rope_interleave HF rotates (x[i], x[i + R/2]); the adapter then permutes
the rope rows of q_b_proj and kv_a_proj_with_mqa so that libmla's pairs are
HF's pairs. YaRN comes from ``rope_parameters`` (transformers 5) or
``rope_scaling`` (4.x); the adapter checks HF's inverse frequencies, cos/sin
factor and softmax scale against libmla's and refuses a model whose RoPE it
would not reproduce.

Positions: the session counts each sequence's tokens (every call appends S
new tokens to each of the B sequences); position_ids / cache_position, when
given, must agree. Activations are those of the model (float32 or bfloat16);
the latent cache and q are bf16 (libmla's plan defaults).
Only inference: no attention bias, no dropout, no padding masks.
"""

import os
import tempfile

import numpy as np
import torch

import libmla

NAMES = ("q_a_proj", "q_a_layernorm", "q_b_proj", "q_proj", "kv_a_proj_with_mqa",
         "kv_a_layernorm", "kv_b_proj", "o_proj")


def rope_parameters(cfg):
    """(theta, rope type, the rest) from a transformers 4.x or 5.x config."""
    p = dict(getattr(cfg, "rope_scaling", None) or {})
    p.update(getattr(cfg, "rope_parameters", None) or {})
    theta = p.get("rope_theta", getattr(cfg, "rope_theta", 10000.0))
    kind = p.get("rope_type", p.get("type", "default")) or "default"
    return float(theta), kind, p


def mla_config(cfg, eps):
    """The libmla ModelConfig of a DeepseekV3Config."""
    theta, kind, p = rope_parameters(cfg)
    mc = libmla.ModelConfig()
    mc.name = b"hf-deepseek-v3"
    mc.hidden = cfg.hidden_size
    mc.heads = cfg.num_attention_heads
    mc.q_lora = cfg.q_lora_rank or 0
    mc.kv_lora = cfg.kv_lora_rank
    mc.nope = cfg.qk_nope_head_dim
    mc.rope = cfg.qk_rope_head_dim
    mc.v = cfg.v_head_dim
    mc.rms_eps = eps
    mc.max_pos = cfg.max_position_embeddings
    rc = mc.rope_cfg
    rc.dim, rc.base = cfg.qk_rope_head_dim, theta
    rc.factor, rc.beta_fast, rc.beta_slow, rc.original_max_pos = 1.0, 32.0, 1.0, 4096
    rc.mscale, rc.mscale_all_dim = 1.0, 0.0
    if kind == "yarn":
        rc.factor = float(p["factor"])
        rc.beta_fast = float(p.get("beta_fast") or 32.0)
        rc.beta_slow = float(p.get("beta_slow") or 1.0)
        rc.original_max_pos = int(p.get("original_max_position_embeddings")
                                  or cfg.max_position_embeddings)
        mscale, mscale_all = p.get("mscale"), p.get("mscale_all_dim")
        if mscale and mscale_all:  # HF: attention_factor = m(f, mscale) / m(f, mscale_all_dim)
            rc.mscale, rc.mscale_all_dim = float(mscale), float(mscale_all)
        elif mscale_all:  # HF's cos/sin factor is then m(f, 1), its softmax m(f, all)^2
            raise ValueError("yarn with mscale_all_dim but no mscale: HF's cos/sin factor and "
                             "softmax scale do not factor into libmla's (mscale, mscale_all_dim)")
        if p.get("attention_factor") is not None:
            raise ValueError("an explicit attention_factor is not supported")
    elif kind != "default":
        raise ValueError("RoPE type %r is not DeepSeek's (default or yarn)" % kind)
    mc.index_heads, mc.index_head_dim, mc.index_topk = 0, 128, 2048
    return mc


def neox_to_interleaved(R):
    """perm with new[2i] = old[i], new[2i + 1] = old[i + R/2]."""
    perm = np.empty(R, np.int64)
    perm[0::2], perm[1::2] = np.arange(R // 2), np.arange(R // 2) + R // 2
    return perm


def _weights_of(attn, cfg):
    """The module's weights by DeepSeek's names (float32 numpy), rope rows
    permuted for NeoX models."""
    w = {}
    for n in NAMES:
        m = getattr(attn, n, None)
        if m is not None:
            if getattr(m, "bias", None) is not None:
                raise ValueError("%s has a bias; libmla's layer has none" % n)
            w[n] = m.weight.detach().float().cpu().numpy()
    if not getattr(cfg, "rope_interleave", True):
        H, nope, R, L = cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, \
            cfg.kv_lora_rank
        perm = neox_to_interleaved(R)
        qn = "q_b_proj" if "q_b_proj" in w else "q_proj"
        q = w[qn].reshape(H, nope + R, -1).copy()
        q[:, nope:, :] = q[:, nope:, :][:, perm, :]
        w[qn] = q.reshape(H * (nope + R), -1)
        kv = w["kv_a_proj_with_mqa"].copy()
        kv[L:, :] = kv[L:, :][perm, :]
        w["kv_a_proj_with_mqa"] = kv
    return w


def check_rope(mc, rotary, scaling):
    """Refuses a model whose inverse frequencies, cos/sin factor or softmax
    scale libmla would not reproduce (within fp32 rounding)."""
    cos, sin = libmla.rope_table(mc, 2)
    inv = np.arctan2(sin[1], cos[1]).astype(np.float64)
    amp = float(np.hypot(cos[0, 0], sin[0, 0]))
    if rotary is not None:
        hf = rotary.inv_freq.detach().double().cpu().numpy()
        if hf.shape != inv.shape or np.max(np.abs(hf - inv) / hf) > 1e-5:
            raise ValueError("HF's inverse frequencies differ from libmla's: %s vs %s" % (hf, inv))
        a = float(getattr(rotary, "attention_scaling", 1.0))
        if abs(a - amp) > 1e-6 * a:
            raise ValueError("HF's cos/sin factor %g, libmla's %g" % (a, amp))
    s = libmla.softmax_scale(mc)
    if abs(s - scaling) > 1e-6 * scaling:
        raise ValueError("HF's softmax scale %g, libmla's %g" % (scaling, s))


class Session:
    """The libmla side of a patched model: context, plans, latent caches,
    and the step's batch (B sequences growing together)."""

    def __init__(self, model, *, batch=1, max_context=None, block_size=16, ctx=None):
        cfg = model.config
        attns = [m for m in model.modules() if type(m).__name__ == "DeepseekV3Attention"]
        if not attns:
            raise ValueError("no DeepseekV3Attention in the model")
        param = next(model.parameters())
        self.device = param.device
        self.own_ctx = ctx is None
        if ctx is None:
            ctx = libmla.Context("hip", device=self.device.index or 0) \
                if self.device.type == "cuda" else libmla.Context("cpu")
        self.ctx, self.cfg, self.B = ctx, cfg, batch
        eps = attns[0].kv_a_layernorm.variance_epsilon
        self.mc = mla_config(cfg, eps)
        rotary = getattr(getattr(model, "model", model), "rotary_emb", None)
        check_rope(self.mc, rotary, attns[0].scaling)
        self.max_context = max_context or cfg.max_position_embeddings
        self.bs = block_size
        self.max_blocks = -(-self.max_context // block_size)
        self.plan = libmla.Plan(self.mc, ctx.target, ctx=ctx)
        self.cache_desc = libmla.cache_desc(batch * self.max_blocks, block_size, cfg.kv_lora_rank,
                                            cfg.qk_rope_head_dim)
        cos, sin = libmla.rope_table(self.mc)
        self.cos = torch.from_numpy(cos).to(self.device)
        self.sin = torch.from_numpy(sin).to(self.device)
        self.weights, self.caches = {}, {}
        self._load(attns)
        self.plans = {}  # (tokens, act) -> [LayerPlan per layer]
        self.workspaces = {}
        self.layers = sorted(self.weights)
        self.reset()

    def _load(self, attns):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "attention.safetensors")
            wr = libmla.SafetensorsWriter()
            for a in attns:
                pre = "model.layers.%d.self_attn." % a.layer_idx
                for n, arr in _weights_of(a, self.cfg).items():
                    if n.endswith("layernorm"):
                        wr.add(pre + n + ".weight", np.ascontiguousarray(arr))
                    else:
                        wr.add(pre + n + ".weight", libmla.convert(arr, dtype="bf16",
                                                                   ctx=libmla.default_context()),
                               dtype="bf16")
            wr.save(path)
            wr.close()
            f = libmla.SafetensorsFile(path, ctx=self.ctx)
            for a in attns:
                self.weights[a.layer_idx] = libmla.LayerWeights(self.ctx, f, self.mc, a.layer_idx)
                self.caches[a.layer_idx] = torch.zeros(
                    (self.cache_desc.num_blocks, libmla.cache_block_bytes(self.cache_desc)),
                    dtype=torch.uint8, device=self.device)
            f.close()

    def close(self):
        """Frees the plans, weights and caches (and the context it made)."""
        for plans in self.plans.values():
            for lp in plans.values():
                lp.close()
        for w in self.weights.values():
            w.close()
        self.plans, self.weights, self.caches, self.workspaces = {}, {}, {}, {}
        self.plan.close()
        if self.own_ctx:
            self.ctx.close()

    def reset(self):
        """Forgets every sequence (a new generation); the caches are reused."""
        self.lengths = [0] * self.B
        self.step = None  # (S, batch tensors) of the step in progress

    def _open_step(self, S, position_ids):
        if self.step is not None:
            self.lengths = [n + self.step[0] for n in self.lengths]
        pos = np.array([[n + j for j in range(S)] for n in self.lengths], np.int64)
        if position_ids is not None:
            given = position_ids.detach().cpu().numpy().reshape(-1, S)
            if not np.array_equal(np.broadcast_to(given, pos.shape), pos):
                raise ValueError("positions %s, but the session's sequences are at %s: call "
                                 "session.reset() for a new generation" % (given, pos))
        if pos.max() >= self.max_context:
            raise ValueError("context longer than max_context=%d" % self.max_context)
        base = np.arange(self.B, dtype=np.int64)[:, None] * self.max_blocks * self.bs
        dev = self.device
        batch = {
            "positions": torch.from_numpy(pos.reshape(-1).astype(np.int32)).to(dev),
            "slots": torch.from_numpy((base + pos).reshape(-1).astype(np.int32)).to(dev),
            "block_table": torch.arange(self.B * self.max_blocks, dtype=torch.int32)
                                .reshape(self.B, self.max_blocks).to(dev),
            "context_lens": torch.from_numpy(pos[:, -1].astype(np.int32) + 1).to(dev),
            "next_n": S,
        }
        self.step = (S, batch)

    def forward(self, attn, hidden_states, position_ids):
        B, S, hidden = hidden_states.shape
        if B != self.B:
            raise ValueError("the session holds %d sequences, the batch has %d" % (self.B, B))
        layer = attn.layer_idx
        if layer == self.layers[0]:
            self._open_step(S, position_ids)
        _, batch = self.step
        act = {torch.float32: "f32", torch.bfloat16: "bf16"}.get(hidden_states.dtype)
        if act is None:
            raise ValueError("activations must be float32 or bfloat16, not %s"
                             % hidden_states.dtype)
        key = (B * S, act)
        plans = self.plans.setdefault(key, {})
        lp = plans.get(layer)
        if lp is None:
            opt = libmla.layer_options(self.mc, self.cache_desc, act=act)
            ws = self.workspaces.get(key)
            if ws is None:
                n = libmla.layer_workspace_bytes(self.ctx, self.plan, opt, B * S, B,
                                                 self.max_context)
                ws = self.workspaces[key] = libmla._tensor.empty_workspace(
                    hidden_states, n, self.ctx)
            lp = plans[layer] = libmla.LayerPlan(
                self.plan, self.cache_desc, opt, max_context=self.max_context, cos=self.cos,
                sin=self.sin, cache=self.caches[layer], workspace=ws, ctx=self.ctx, **batch)
            lp.batch_step = self.step
        elif lp.batch_step is not self.step:
            lp.update(batch["positions"], batch["slots"], batch["block_table"],
                      batch["context_lens"], next_n=batch["next_n"])
            lp.batch_step = self.step
        x = hidden_states.reshape(B * S, hidden)
        y = lp.forward(self.weights[layer], x)
        return y.reshape(B, S, hidden)


def patch(model, **kw):
    """Replaces every DeepseekV3Attention.forward of ``model`` by libmla's;
    returns the Session (``session.reset()`` starts a new generation;
    ``unpatch(model)`` restores HF's forwards)."""
    session = Session(model, **kw)
    for m in model.modules():
        if type(m).__name__ == "DeepseekV3Attention":
            m._hf_forward = m.forward

            def forward(hidden_states, position_embeddings=None, attention_mask=None,
                        past_key_values=None, cache_position=None, position_ids=None,
                        past_key_value=None, _m=m, **kwargs):
                return session.forward(_m, hidden_states, position_ids), None

            m.forward = forward
    model._libmla_session = session
    return session


def unpatch(model):
    for m in model.modules():
        if hasattr(m, "_hf_forward"):
            m.forward = m._hf_forward
            del m._hf_forward
    s = getattr(model, "_libmla_session", None)
    if s is not None:
        s.close()
        del model._libmla_session
