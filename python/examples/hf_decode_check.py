"""A tiny random DeepseekV3 model from Hugging Face transformers, prefill + 32
greedy decode steps, stock against libmla's attention (deepseek_v3_adapter):
same tokens, logits within a bound derived from libmla's roundings, and the
time per decode step of both.

    LIBMLA_LIBRARY=build/default python3 python/examples/hf_decode_check.py --backend cpu
    LIBMLA_LIBRARY=build/gpu     python3 python/examples/hf_decode_check.py --backend hip

The bound, per logit (first order, the method of docs/LAYER.md):
  |libmla - stock| <= 6 sd_lib + 2 d32
* sd_lib: the standard deviation of libmla's error against exact arithmetic.
  Its sources are the roundings libmla makes, each independent: q_cat and the
  latent cache rows in bf16 (u = 2^-8; every cached element one source shared
  by all later queries), the fp32 chains and accumulations
  (python/examples/mla_bound.py gives each attention output's sensitivity to
  each source). They reach the logits through the model: the Jacobian J of
  the logits with respect to every layer's attention output at every position
  (float64 autograd over the teacher-forced sequence; it carries an error
  made at step t into every later step through the cache and the residual
  stream), so sd_lib^2 = sum over sources (J dy/dsource sd_source)^2.
* d32 = |stock - exact|: the stock fp32 model's own error, measured against
  the same model in float64 with exact RoPE angles. The libmla run's
  non-attention layers are that same fp32 code on nearly the same inputs, so
  their error is taken as d32 again (hence 2 d32).
Tokens: the libmla run is teacher-forced with the stock tokens (so a flip
cannot cascade) and its own argmax must equal the stock's at every step; the
script also reports the smallest top-2 logit gap in units of the bound (above
2, a flip would contradict the bound).
"""

import argparse
import copy
import math
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deepseek_v3_adapter as A  # noqa: E402
import mla_bound  # noqa: E402

import libmla  # noqa: E402


def tiny_config(rope):
    from transformers import DeepseekV3Config
    base = dict(vocab_size=128, hidden_size=128, intermediate_size=256,
                moe_intermediate_size=64, num_hidden_layers=2, first_k_dense_replace=2,
                num_attention_heads=4, num_key_value_heads=4, q_lora_rank=96, kv_lora_rank=128,
                qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32,
                max_position_embeddings=256, rope_interleave=True, attention_bias=False,
                tie_word_embeddings=False, rms_norm_eps=1e-6)
    params = {"rope_type": "default", "rope_theta": 10000.0}
    if rope == "yarn":
        params = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "beta_fast": 32.0,
                  "beta_slow": 1.0, "original_max_position_embeddings": 64, "mscale": 1.0,
                  "mscale_all_dim": 1.0}
    for kw in ({"rope_parameters": params},  # transformers 5
               {"rope_theta": 10000.0,
                "rope_scaling": None if rope == "default" else params}):  # 4.x
        try:
            cfg = DeepseekV3Config(**base, **kw)
        except TypeError:
            continue
        if A.rope_parameters(cfg)[1] == params["rope_type"]:
            return cfg
    raise SystemExit("cannot make a DeepseekV3Config with %s RoPE" % rope)


def tiny_model(cfg, seed, device):
    from transformers import DeepseekV3ForCausalLM
    torch.manual_seed(seed)
    model = DeepseekV3ForCausalLM(cfg).eval()
    if hasattr(model, "set_attn_implementation"):  # the plain fp32 reference, not SDPA
        model.set_attn_implementation("eager")
    else:
        model.config._attn_implementation = "eager"
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2 and "embed" in name:
                p.normal_(0.0, 1.0)
            elif p.dim() == 2:
                p.normal_(0.0, 1.0 / math.sqrt(p.shape[1]))
                if ".self_attn." in name:  # libmla takes bf16 projections: make them exact
                    p.copy_(p.bfloat16().float())
            else:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
    return model.to(device)


def exact_rope(cfg):
    """float64 inverse frequencies and cos/sin factor of the config."""
    theta, kind, p = A.rope_parameters(cfg)
    R = cfg.qk_rope_head_dim
    if kind == "yarn":
        f = float(p["factor"])
        inv = mla_bound.deepseek_inv_freq(R, theta, f, p.get("beta_fast", 32),
                                          p.get("beta_slow", 1),
                                          p.get("original_max_position_embeddings"))
        return inv, mla_bound.yarn_m(f, p.get("mscale", 1)) / mla_bound.yarn_m(
            f, p.get("mscale_all_dim", 0))
    return mla_bound.deepseek_inv_freq(R, theta), 1.0


def float64_model(model, cfg):
    """The model in float64 with exact RoPE angles (HF computes them in fp32)."""
    m64 = copy.deepcopy(model).double()
    inv, amp = exact_rope(cfg)
    inv_t = torch.tensor(inv, dtype=torch.float64, device=next(model.parameters()).device)

    def rotary(x, position_ids=None, *args, **kw):
        freqs = position_ids[..., None].double() * inv_t
        emb = torch.cat((freqs, freqs), -1)
        return (emb.cos() * amp).to(x.dtype), (emb.sin() * amp).to(x.dtype)

    m64.model.rotary_emb.forward = rotary
    return m64


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


@torch.no_grad()
def stock_run(model, prompt, steps):
    dev = prompt.device
    out = model(input_ids=prompt, use_cache=True)
    logits, tokens, times = [out.logits[:, -1].float()], [], []
    nxt = logits[-1].argmax(-1)
    for _ in range(steps):
        tokens.append(nxt)
        sync(dev)
        t0 = time.perf_counter()
        out = model(input_ids=nxt[:, None], past_key_values=out.past_key_values, use_cache=True)
        sync(dev)
        times.append(time.perf_counter() - t0)
        logits.append(out.logits[:, -1].float())
        nxt = logits[-1].argmax(-1)
    return torch.stack(logits), torch.stack(tokens, 1), times


@torch.no_grad()
def libmla_run(model, prompt, tokens, ctx):
    """Teacher-forced with the stock tokens; returns logits, own argmax, times."""
    B, P = prompt.shape
    session = A.patch(model, batch=B, max_context=P + tokens.shape[1] + 1, ctx=ctx)
    dev = prompt.device
    pos = torch.arange(P, device=dev)[None].expand(B, P)
    out = model(input_ids=prompt, position_ids=pos, use_cache=False)
    logits, own, times = [out.logits[:, -1].float()], [], []
    for i in range(tokens.shape[1]):
        own.append(logits[-1].argmax(-1))
        p = torch.full((B, 1), P + i, device=dev)
        sync(dev)
        t0 = time.perf_counter()
        out = model(input_ids=tokens[:, i:i + 1], position_ids=p, use_cache=False)
        sync(dev)
        times.append(time.perf_counter() - t0)
        logits.append(out.logits[:, -1].float())
    A.unpatch(model)
    del session
    return torch.stack(logits), torch.stack(own, 1), times


def bound(model, cfg, seq, P0, chunk=512):
    """(6 sd_lib, exact logits) for positions P0 - 1 .. end of the teacher-forced
    sequence seq [B, N] (see the module docstring); computed on a GPU when
    there is one."""
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    m64 = float64_model(model.to(dev), cfg)
    seq = seq.to(dev)
    B, N = seq.shape
    attns = [m for m in m64.modules() if type(m).__name__ == "DeepseekV3Attention"]
    Lyr, hidden = len(attns), cfg.hidden_size
    inputs, delta = {}, {}

    def pre(m, args, kwargs):
        inputs[m.layer_idx] = (kwargs.get("hidden_states", args[0] if args else None)).detach()

    def post(m, args, kwargs, out):
        if m.layer_idx in delta:
            return (out[0] + delta[m.layer_idx],) + tuple(out[1:])
        return out

    try:
        hooks = [a.register_forward_pre_hook(pre, with_kwargs=True) for a in attns]
        hooks += [a.register_forward_hook(post, with_kwargs=True) for a in attns]
    except TypeError:  # torch < 2.0: positional arguments only
        hooks = [a.register_forward_pre_hook(lambda m, args: pre(m, args, {})) for a in attns]
        hooks += [a.register_forward_hook(lambda m, args, out: post(m, args, {}, out))
                  for a in attns]
    pos = torch.arange(N, device=dev)[None].expand(B, N)

    def f(d):
        for i, a in enumerate(attns):
            delta[a.layer_idx] = d[i]
        out = m64(input_ids=seq, position_ids=pos, use_cache=False).logits
        return out[:, P0 - 1:].reshape(-1)

    d0 = torch.zeros(Lyr, B, N, hidden, dtype=torch.float64, device=dev)
    func = getattr(torch, "func", None)
    if func is None:  # torch 1.13 ships the same transforms as functorch
        import functorch as func
    exact, vjp = func.vjp(f, d0)
    exact = exact.detach()
    for h in hooks:
        h.remove()
    inv, amp = exact_rope(cfg)
    # the sources of every layer and sequence
    srcs = []
    for i, a in enumerate(attns):
        w = {n: getattr(a, n).weight.detach().double().cpu().numpy() for n in A.NAMES
             if getattr(a, n, None) is not None}
        sh = mla_bound.ShadowMLA(w, heads=cfg.num_attention_heads, nope=cfg.qk_nope_head_dim,
                                 rope=cfg.qk_rope_head_dim, v=cfg.v_head_dim,
                                 kv_lora=cfg.kv_lora_rank, eps=a.kv_a_layernorm.variance_epsilon,
                                 scale=a.scaling, inv_freq=inv, mscale=amp)
        x = inputs[a.layer_idx].cpu().numpy()
        per_seq = []
        for b in range(B):
            rows = sh.step(b, x[b], np.arange(N), sources=True)[2]
            t = lambda k: [torch.from_numpy(r[k]).to(dev) for r in rows]  # noqa: E731
            per_seq.append((torch.stack(t("q")), t("k"), torch.stack(t("own"))))
        srcs.append(per_seq)
    n_out = exact.numel()
    var = torch.zeros(n_out, dtype=torch.float64, device=dev)
    D = cfg.kv_lora_rank + cfg.qk_rope_head_dim
    for c0 in range(0, n_out, chunk):
        rows = torch.arange(c0, min(c0 + chunk, n_out), device=dev)
        eye = torch.zeros(len(rows), n_out, dtype=torch.float64, device=dev)
        eye[torch.arange(len(rows)), rows] = 1
        try:
            J = func.vmap(vjp)(eye)[0]  # [chunk, L, B, N, hidden]
        except (RuntimeError, NotImplementedError):  # an op without a batching rule
            J = torch.stack([vjp(e)[0] for e in eye])
        J = J.detach()  # (the transforms build J with a graph; none is needed here)
        for i in range(Lyr):
            for b in range(B):
                mq, mk, own = srcs[i][b]
                j = J[:, i, b]                                      # [chunk, N, hidden]
                # a row's q_cat and fp32 sources are its own; a cached element is
                # a source of every later row of the layer: sum those first
                var[rows] += (torch.einsum("cny,nys->cns", j, mq) ** 2).sum((1, 2))
                var[rows] += torch.einsum("cny,ny->c", j ** 2, own)
                acc_k = torch.zeros(len(rows), N * D, dtype=torch.float64, device=dev)
                for t in range(N):
                    acc_k[:, :mk[t].shape[1]] += j[:, t] @ mk[t]
                var[rows] += (acc_k ** 2).sum(1)
    return 6 * var.sqrt().reshape(B, -1, cfg.vocab_size).transpose(0, 1), \
        exact.reshape(B, -1, cfg.vocab_size).transpose(0, 1)


def check(model, cfg, prompt, steps, ctx):
    """Runs both, derives the bound; returns (passed, summary lines)."""
    device = prompt.device
    s_logits, s_tok, s_times = stock_run(model, prompt, steps)
    l_logits, l_tok, l_times = libmla_run(copy.deepcopy(model), prompt, s_tok, ctx)
    seq = torch.cat([prompt, s_tok], 1)
    b6, exact = bound(model, cfg, seq, prompt.shape[1])
    b6, exact = b6.to(device), exact.to(device)
    d32 = (s_logits.double() - exact).abs()
    limit = b6 + 2 * d32
    diff = (l_logits.double() - s_logits.double()).abs()
    ratio = (diff / limit).max().item()
    top2 = torch.topk(s_logits.double(), 2, -1).values
    gaps = (top2[..., 0] - top2[..., 1]) / limit.max(-1).values  # [steps + 1, B]
    gap = gaps.min().item()
    l_tok, s_tok = l_tok.to(gaps.device), s_tok.to(gaps.device)
    same = torch.equal(l_tok, s_tok)
    # a greedy token may flip only where stock's top two are within the bound
    near_tie = gaps[: s_tok.shape[1]].T <= 1.0
    decided = bool(((l_tok == s_tok) | near_tie).all())
    ms = lambda t: 1e3 * float(np.median(t))  # noqa: E731
    lines = [
        "  tokens equal          : %s%s" % (
            same, "" if same or not decided else " (flips only at top-2 gaps within the bound)"),
        "  max |logit diff|      : %.3g (bound at that logit %.3g)" % (
            diff.max().item(), limit.flatten()[diff.argmax()].item()),
        "  max diff / bound      : %.3f (6 sd_lib: max %.3g, 2 d32: max %.3g)" % (
            ratio, b6.max().item(), 2 * d32.max().item()),
        "  min top-2 gap / bound : %.1f" % gap,
        "  decode step, median   : stock %.2f ms, libmla %.2f ms" % (ms(s_times), ms(l_times)),
    ]
    return decided and ratio <= 1.0, lines, ratio


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="cpu", choices=["cpu", "hip", "reference"])
    ap.add_argument("--rope", default="default", choices=["default", "yarn"])
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    torch.set_float32_matmul_precision("highest")
    device = torch.device("cuda" if a.backend == "hip" else "cpu")
    cfg = tiny_config(a.rope)
    model = tiny_model(cfg, a.seed, device)
    g = torch.Generator().manual_seed(a.seed + 1)
    prompt = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt), generator=g).to(device)
    ctx = libmla.Context(a.backend)
    print("libmla %s, backend %s (%s), RoPE %s, batch %d, prompt %d, %d decode steps" % (
        libmla.version(), a.backend, ctx.device_name, a.rope, a.batch, a.prompt, a.steps))
    passed, lines, _ = check(model, cfg, prompt, a.steps, ctx)
    print("\n".join(lines))
    print("  result                : %s" % ("PASS" if passed else "FAIL"))
    ctx.close()
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
