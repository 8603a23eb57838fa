"""The MLA prepare path (MLA.md sections 2-4): model configs, RoPE tables and
RoPE, RMSNorm, projections, the latent cache, the fused RoPE + concat +
cache write, the RoPE-once plan and mla_prepare."""

import ctypes

from . import _lib
from . import _tensor as TS
from . import _types as T
from . import _util as U
from .context import Call, Handle

S = T.Status
DT = T.DType
ModelConfig = T.ModelConfig
CacheDesc = T.CacheDesc


# ---------------------------------------------------------------- configs

def model_config_presets():
    """The preset names mla_model_config_preset knows."""
    out, i = [], 0
    while True:
        n = _lib.lib().mla_model_config_preset_name(i)
        if not n:
            return out
        out.append(n.decode())
        i += 1


def model_config(name, **fields):
    """The preset config ``name`` (see model_config_presets), with fields
    overridden by keyword (``heads=16``). A ctypes struct: set fields on it."""
    cfg = ModelConfig()
    st = _lib.lib().mla_model_config_preset(name.encode(), ctypes.byref(cfg))
    if st != 0:
        raise _lib.Error(st, "name", "%r is not a preset (%s)" % (name,
                                                                   ", ".join(model_config_presets())))
    for k, v in fields.items():
        U.need(hasattr(cfg, k), S.ERR_INVALID_ARGUMENT, k, "mla_model_config has no field %r" % k)
        setattr(cfg, k, v)
    return cfg


def softmax_scale(cfg):
    """(nope + R)^-0.5 * m^2 (m from YaRN's mscale_all_dim)."""
    return _lib.lib().mla_softmax_scale(ctypes.byref(cfg))


def rope_table(cfg, max_pos=None):
    """(cos, sin), each NumPy float32 [max_pos, R/2]: float64 math, every entry
    rounded once (MLA.md section 3); cfg is a ModelConfig or a RopeConfig."""
    import numpy as np
    rc = cfg.rope_cfg if isinstance(cfg, ModelConfig) else cfg
    if max_pos is None:
        U.need(isinstance(cfg, ModelConfig), S.ERR_INVALID_ARGUMENT, "max_pos",
               "give max_pos with a RopeConfig")
        max_pos = cfg.max_pos
    cos = np.empty((int(max_pos), rc.dim // 2), dtype=np.float32)
    sin = np.empty_like(cos)
    fp = ctypes.POINTER(ctypes.c_float)
    _lib.check(_lib.lib().mla_rope_table_build(ctypes.byref(rc), int(max_pos),
                                               cos.ctypes.data_as(fp), sin.ctypes.data_as(fp)))
    return cos, sin


def cache_desc(num_blocks, block_size, kv_lora, rope, *, layout="normal", dtype="bf16",
               k_scale=1.0):
    """A latent cache descriptor (mla_cache_desc), validated."""
    d = CacheDesc(int(U.enum(T.CacheLayout, layout, "layout")), int(TS.dtype_of(dtype)),
                  num_blocks, block_size, kv_lora, rope, k_scale)
    cache_block_bytes(d)
    return d


def cache_block_bytes(desc):
    """Bytes of one block of the cache ``desc`` describes."""
    n = ctypes.c_int64()
    st = _lib.lib().mla_cache_block_bytes(ctypes.byref(desc), ctypes.byref(n))
    if st != 0:
        raise _lib.Error(st, "desc", "invalid cache descriptor %r" % (desc,))
    return n.value


def empty_cache(desc, like=None, ctx=None):
    """A zeroed U8 cache [num_blocks, block_bytes] in the context's memory."""
    from .context import default_context
    ctx = ctx or default_context()
    buf = TS.empty(like, (desc.num_blocks, cache_block_bytes(desc)), DT.U8, ctx)
    c = Call(ctx)
    p = c.t(buf, "cache", out=True)
    c.check(_lib.lib().mla_memset(c.h, p.contents.data, 0,
                                  desc.num_blocks * cache_block_bytes(desc)))
    return buf


# ------------------------------------------------------------------- ops

def rope(x, positions, cos, sin, out=None, *, style="interleaved", ctx=None):
    """x [T, H, R] or [T, R] (F32, BF16, F16, any strides) rotated by
    ``positions`` [T] (I32/I64) with the table (cos, sin) [P, R/2]; out may
    be x itself (in place, same bits). Only the first 2 * cos.shape[1] dims
    of each row rotate."""
    c = Call(ctx, x, out)
    px = c.t(x, "x")
    pp = c.t(positions, "positions")
    pcos, psin = c.t(cos, "cos"), c.t(sin, "sin")
    py, out = c.out(out, "y", U.shape(px), U.dtype(px))
    c.check(_lib.lib().mla_rope(c.h, pcos, psin, pp, px, py,
                                int(U.enum(T.RopeStyle, style, "style"))))
    return out


def rmsnorm(x, w, eps=1e-6, out=None, *, dtype=None, ctx=None):
    """x * rsqrt(mean(x^2) + eps) * w over rows: x, out [T, D] (F32, BF16,
    F16), w [D]; fp32 math, one rounding to out's dtype."""
    c = Call(ctx, x, out)
    px, pw = c.t(x, "x"), c.t(w, "w")
    dt = TS.dtype_of(dtype) if dtype is not None else U.dtype(px)
    py, out = c.out(out, "y", U.shape(px), dt, hint=dt)
    c.check(_lib.lib().mla_rmsnorm(c.h, px, pw, float(eps), py))
    return out


def fused_qk_rmsnorm(q, q_w, kv, kv_w, q_eps=1e-6, kv_eps=1e-6, q_out=None, kv_out=None,
                     q_scales=None, *, q_dtype=None, ctx=None):
    """Both MLA norms in one call -> (q_out, q_scales, kv_out). ``q_dtype``
    "fp8_e4m3fn"/"fp8_e4m3fnuz" quantizes q_out (group 128, F32 scales
    [T, Dq/128]), "fp4x2" to MXFP4 (e8m0 scales [T, Dq/32]); q_scales is
    None otherwise."""
    c = Call(ctx, q, kv, q_out, kv_out)
    pq, pqw, pkv, pkvw = c.t(q, "q"), c.t(q_w, "q_w"), c.t(kv, "kv"), c.t(kv_w, "kv_w")
    T_, Dq = U.rank(pq, 2, "q")
    qd = TS.dtype_of(q_dtype) if q_dtype is not None else U.dtype(pq)
    shape_q = (T_, Dq // 2) if qd == DT.FP4X2 else (T_, Dq)
    pqo, q_out = c.out(q_out, "q_out", shape_q, qd, hint=qd)
    pkvo, kv_out = c.out(kv_out, "kv_out", U.shape(pkv), U.dtype(pkv))
    ps = None
    if qd in (DT.FP8_E4M3FN, DT.FP8_E4M3FNUZ):
        ps, q_scales = c.out(q_scales, "q_scales", (T_, Dq // 128), DT.F32)
    elif qd == DT.FP4X2:
        ps, q_scales = c.out(q_scales, "q_scales", (T_, Dq // 32), DT.E8M0, hint=DT.E8M0)
    c.check(_lib.lib().mla_fused_qk_rmsnorm(c.h, pq, pqw, float(q_eps), pkv, pkvw, float(kv_eps),
                                            pqo, ps, pkvo))
    return q_out, q_scales, kv_out


def linear(x, w, w_scale=None, out=None, *, dtype=None, ctx=None):
    """out [T, N] = x [T, K] @ w^T, fp32 accumulation: w [N, K] BF16, or fp8
    e4m3fn codes with w_scale [ceil(N/128), ceil(K/128)] F32 block scales
    (a uint8 w with a w_scale is read as e4m3fn)."""
    c = Call(ctx, x, out)
    px = c.t(x, "x")
    pw = c.t(w, "w", hint=DT.FP8_E4M3FN if w_scale is not None else None)
    pws = c.t(w_scale, "w_scale")
    dt = TS.dtype_of(dtype) if dtype is not None else U.dtype(px)
    py, out = c.out(out, "y", (U.shape(px)[0], U.shape(pw)[0]), dt, hint=dt)
    c.check(_lib.lib().mla_linear(c.h, px, pw, pws, py))
    return out


def batched_gemm(x, w, w_scale=1.0, out=None, *, dtype=None, ctx=None):
    """out[b] = x[b] @ w[b] * w_scale: x [B, M, K] (F32, BF16), w [B, K, N]
    (BF16, or e4m3fn with the per-tensor w_scale), out [B, M, N], all
    through their strides (pass views: no copy is made)."""
    c = Call(ctx, x, out)
    px = c.t(x, "x")
    pw = c.t(w, "w", hint=DT.FP8_E4M3FN)
    B, M, _ = U.rank(px, 3, "x")
    dt = TS.dtype_of(dtype) if dtype is not None else U.dtype(px)
    py, out = c.out(out, "y", (B, M, U.shape(pw)[2]), dt, hint=dt)
    c.check(_lib.lib().mla_batched_gemm(c.h, px, pw, float(w_scale), py))
    return out


def cache_write(desc, cache, k_nope, k_pe, slots, *, ctx=None):
    """Writes [k_nope | k_pe] of token t at slots[t] (negative: skipped):
    cache U8 [num_blocks, block_bytes], k_nope [T, L], k_pe [T, R]."""
    c = Call(ctx, cache)
    pc = c.t(cache, "cache", out=True)
    c.check(_lib.lib().mla_cache_write(c.h, ctypes.byref(desc), pc, c.t(k_nope, "k_nope"),
                                       c.t(k_pe, "k_pe"), c.t(slots, "slots")))


def cache_gather(desc, cache, block_table, seq_lens, out=None, *, dtype="f32", total=None,
                 ctx=None):
    """The rows of the listed sequences as NORMAL rows [sum(seq_lens), L + R]
    (F32 or BF16). ``total`` (= sum(seq_lens)) sizes a new output without
    reading seq_lens (required for device tensors)."""
    c = Call(ctx, cache, out)
    pc = c.t(cache, "cache")
    pt, pl = c.t(block_table, "block_table"), c.t(seq_lens, "seq_lens")
    if out is None and total is None:
        total = int(sum(int(v) for v in _host_values(seq_lens)))
    dt = TS.dtype_of(dtype)
    po, out = c.out(out, "out", (total, desc.kv_lora + desc.rope), dt, hint=dt)
    c.check(_lib.lib().mla_cache_gather(c.h, ctypes.byref(desc), pc, pt, pl, po))
    return out


def _host_values(obj):
    """The values of a small host index tensor (to size an output)."""
    if hasattr(obj, "tolist"):
        d = TS.describe(obj, "lengths")
        U.need(d.device == "host", S.ERR_INVALID_ARGUMENT, "total",
               "give the output (or its size) for device index tensors")
        return obj.tolist()
    return list(obj)


def fused_rope_concat_cache(*, cos, sin, q_nope, q_pe, q_pos, k_nope, k_pe, k_pos, slots,
                            cache_desc, cache, q_cat=None, q_scale=1.0, k_pe_out=None,
                            style="interleaved", q_dtype="bf16", ctx=None):
    """RoPE on q_pe [T, H, R] and k_pe [Tk, R] once, q_cat [T, H, L + R] =
    [q_nope | rotated q_pe] (BF16, or fp8 stored sat(x / q_scale)), and every
    key's [k_nope | rotated k_pe] written at slots. Returns (q_cat, k_pe_out)."""
    c = Call(ctx, q_nope, q_cat)
    a = T.RopeCacheArgs()
    a.cos, a.sin = c.t(cos, "cos"), c.t(sin, "sin")
    a.style = int(U.enum(T.RopeStyle, style, "style"))
    a.q_nope, a.q_pe, a.q_pos = c.t(q_nope, "q_nope"), c.t(q_pe, "q_pe"), c.t(q_pos, "q_pos")
    a.k_nope, a.k_pe, a.k_pos = c.t(k_nope, "k_nope"), c.t(k_pe, "k_pe"), c.t(k_pos, "k_pos")
    a.slots = c.t(slots, "slots")
    a.cache_desc = ctypes.pointer(cache_desc)
    a.cache = c.t(cache, "cache", out=True)
    Tq, H, L = U.rank(a.q_nope, 3, "q_nope")
    R = U.shape(a.q_pe)[-1]
    qd = TS.dtype_of(q_dtype)
    a.q_cat, q_cat = c.out(q_cat, "q_cat", (Tq, H, L + R), qd, hint=qd)
    a.q_scale = float(q_scale)
    if k_pe_out is not None:
        a.k_pe_out, k_pe_out = c.out(k_pe_out, "k_pe_out", None, None)
    c.check(_lib.lib().mla_fused_rope_concat_cache(c.h, ctypes.byref(a)))
    return q_cat, k_pe_out


# ------------------------------------------------------------ the plan

class Plan(Handle):
    """The RoPE-once plan of a model on a target: the one place RoPE happens
    (``rope_site``), which every stage asks (``rotates_at``), and the kernel
    variant of each stage (``kernel``).

    Args: cfg (ModelConfig); target (libmla.Target or name; default: the
    context's, or "cpu"); weight_dtype, q_dtype, cache_layout, cache_dtype;
    force_rope_site (a RopeSite, tests only)."""

    _free = "mla_plan_destroy"

    def __init__(self, cfg, target=None, *, weight_dtype="bf16", q_dtype="bf16",
                 cache_layout="normal", cache_dtype="bf16", force_rope_site=None, ctx=None):
        if target is None:
            target = ctx.target if ctx is not None else T.Target.CPU
        opt = T.PlanOptions()
        _lib.lib().mla_plan_options_default(int(U.enum(T.Target, target, "target")),
                                            ctypes.byref(opt))
        opt.weight_dtype = int(TS.dtype_of(weight_dtype))
        opt.q_dtype = int(TS.dtype_of(q_dtype))
        opt.cache_layout = int(U.enum(T.CacheLayout, cache_layout, "cache_layout"))
        opt.cache_dtype = int(TS.dtype_of(cache_dtype))
        opt.force_rope_site = -1 if force_rope_site is None else int(
            U.enum(T.RopeSite, force_rope_site, "force_rope_site"))
        h = ctypes.c_void_p()
        st = _lib.lib().mla_plan_create(ctypes.byref(cfg), ctypes.byref(opt), ctypes.byref(h))
        if st != 0:
            raise _lib.Error(st, "options", "mla_plan_create refused %r" % (opt,))
        super().__init__(ctx, h.value)

    @property
    def rope_site(self):
        return T.RopeSite(_lib.lib().mla_plan_rope_site(self.handle))

    def rotates_at(self, site):
        return bool(_lib.lib().mla_plan_rotates_at(self.handle,
                                                   int(U.enum(T.RopeSite, site, "site"))))

    def kernel(self, stage):
        """The kernel variant a stage uses, e.g. "fused_qk_rmsnorm/bf16"."""
        return _lib.cstr(_lib.lib().mla_plan_kernel(self.handle,
                                                    int(U.enum(T.Stage, stage, "stage"))))

    @property
    def config(self):
        return ModelConfig.from_buffer_copy(_lib.lib().mla_plan_config(self.handle).contents)

    @property
    def options(self):
        return T.PlanOptions.from_buffer_copy(_lib.lib().mla_plan_options_get(self.handle).contents)

    def workspace_bytes(self, tokens, act="bf16"):
        """Scratch bytes mla_prepare needs for ``tokens`` tokens."""
        n = ctypes.c_int64()
        _lib.check(_lib.lib().mla_prepare_workspace_bytes(self.handle, int(tokens),
                                                          int(TS.dtype_of(act)), ctypes.byref(n)))
        return n.value


def prepare(plan, weights, x, positions, slots, cos, sin, cache_desc, cache, q_cat=None,
            workspace=None, *, ctx=None):
    """MLA.md section 2, steps 1-6 for x [T, hidden]: returns q_cat
    [T, H, L + R] and writes every token's latent row into the cache at
    slots, RoPE once at the plan's site. ``weights`` is a LayerWeights."""
    c = Call(ctx, x, q_cat)
    px = c.t(x, "x")
    T_ = U.shape(px)[0]
    cfg = plan.config
    qd = T.DType(plan.options.q_dtype)
    pq, q_cat = c.out(q_cat, "q_cat", (T_, cfg.heads, cfg.kv_lora + cfg.rope), qd, hint=qd)
    if workspace is None:
        workspace = TS.empty_workspace(c.first, plan.workspace_bytes(T_, U.dtype(px)), c.ctx)
    pw = c.t(workspace, "workspace", out=True)
    c.check(_lib.lib().mla_prepare(c.h, plan.handle, ctypes.byref(weights.struct.base), px,
                                   c.t(positions, "positions"), c.t(slots, "slots"),
                                   c.t(cos, "cos"), c.t(sin, "sin"), ctypes.byref(cache_desc),
                                   c.t(cache, "cache", out=True), pq, pw))
    return q_cat
