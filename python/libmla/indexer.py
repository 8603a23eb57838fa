"""The DeepSeek-V3.2 sparse (DSA) indexer (MLA.md section 6): LayerNorm,
Hadamard, the fp8 K cache (write, gather), paged MQA logits, top-k, the head
weights, the planned search and the indexer's prepare."""

import ctypes

from . import _lib
from . import _tensor as TS
from . import _types as T
from . import _util as U
from .context import Call, Handle

S = T.Status
DT = T.DType
IndexerCacheDesc = T.IndexerCacheDesc


def layernorm(x, w, b, eps=1e-6, out=None, *, dtype=None, ctx=None):
    """(x - mean) * rsqrt(var + eps) * w + b over rows; x, out [T, D] (F32,
    BF16, F16), w and b [D] F32."""
    c = Call(ctx, x, out)
    px = c.t(x, "x")
    dt = TS.dtype_of(dtype) if dtype is not None else U.dtype(px)
    py, out = c.out(out, "y", U.shape(px), dt, hint=dt)
    c.check(_lib.lib().mla_layernorm(c.h, px, c.t(w, "w"), c.t(b, "b"), float(eps), py))
    return out


def hadamard(x, out=None, *, ctx=None):
    """x @ H_D / sqrt(D) over the last dim (D a power of two <= 1024), F32 or
    BF16; out may be x."""
    c = Call(ctx, x, out)
    px = c.t(x, "x")
    py, out = c.out(out, "y", U.shape(px), U.dtype(px))
    c.check(_lib.lib().mla_hadamard(c.h, px, py))
    return out


def indexer_layout_for(block_size):
    """NORMAL for block_size 1, SHUFFLE otherwise (seed 002's one rule)."""
    return T.IndexerLayout(_lib.lib().mla_indexer_layout_for(int(block_size)))


def indexer_cache_desc(num_blocks, block_size, *, head_dim=128, dtype="fp8_e4m3fn",
                       layout="auto", ue8m0=True):
    """An indexer K cache descriptor (mla_indexer_cache_desc), validated."""
    d = IndexerCacheDesc(num_blocks, block_size, head_dim, int(U.fp8_dtype(dtype)),
                         int(U.enum(T.IndexerLayout, layout, "layout")), 1 if ue8m0 else 0)
    indexer_cache_block_bytes(d)
    return d


def indexer_cache_block_bytes(desc):
    n = ctypes.c_int64()
    st = _lib.lib().mla_indexer_cache_block_bytes(ctypes.byref(desc), ctypes.byref(n))
    if st != 0:
        raise _lib.Error(st, "desc", "invalid indexer cache descriptor %r" % (desc,))
    return n.value


def indexer_k_cache_write(desc, cache, k, slots, *, ctx=None):
    """k [T, head_dim] (F32, BF16, F16) quantized per token into the cache at
    slots (negative: skipped); cache U8 [num_blocks, block_bytes]."""
    c = Call(ctx, cache)
    pc = c.t(cache, "cache", out=True)
    c.check(_lib.lib().mla_indexer_k_cache_write(c.h, ctypes.byref(desc), pc, c.t(k, "k"),
                                                 c.t(slots, "slots")))


def indexer_k_gather(desc, cache, block_table, cu_seq_lens, k_fp8=None, k_scale=None, *,
                     total=None, ctx=None):
    """The exact inverse for the listed sequences -> (k_fp8 [cu[S], head_dim],
    k_scale [cu[S]] F32); ``total`` (= cu[S]) sizes new outputs without
    reading cu_seq_lens."""
    c = Call(ctx, cache, k_fp8)
    pc = c.t(cache, "cache")
    pt, pcu = c.t(block_table, "block_table"), c.t(cu_seq_lens, "cu_seq_lens")
    if total is None and k_fp8 is None:
        from .prepare import _host_values
        total = int(_host_values(cu_seq_lens)[-1])
    fp8 = T.DType(desc.dtype)
    pk, k_fp8 = c.out(k_fp8, "k_fp8", (total, desc.head_dim), fp8, hint=fp8)
    ps, k_scale = c.out(k_scale, "k_scale", (total,), DT.F32)
    c.check(_lib.lib().mla_indexer_k_gather(c.h, ctypes.byref(desc), pc, pt, pcu, pk, ps))
    return k_fp8, k_scale


def indexer_logits(desc, cache, q, w, block_table, context_lens, next_n=1, out=None, *,
                   max_len=None, ctx=None):
    """Paged MQA logits [B*next_n, max_len] F32 (-inf past each row's causal
    bound): q [B*next_n, Hi, 128] fp8 (the cache's flavour), w [B*next_n, Hi]
    F32. ``max_len`` sizes a new output (default: max(context_lens), read on
    the host)."""
    fp8 = T.DType(desc.dtype)
    c = Call(ctx, cache, out)
    pc = c.t(cache, "cache")
    pq, pw = c.t(q, "q", hint=fp8), c.t(w, "w")
    pt, pl = c.t(block_table, "block_table"), c.t(context_lens, "context_lens")
    if out is None and max_len is None:
        from .prepare import _host_values
        max_len = max(int(v) for v in _host_values(context_lens))
    po, out = c.out(out, "logits", (U.shape(pq)[0], max_len), DT.F32)
    c.check(_lib.lib().mla_indexer_logits(c.h, ctypes.byref(desc), pc, pq, pw, pt, pl,
                                          int(next_n), po))
    return out


def topk(logits, lengths, k, out=None, *, ctx=None):
    """Per row: the indices of the min(k, lengths[r]) largest logits in
    ascending index order, ties to the lower index, -1 padded -> I32 [R, k]."""
    c = Call(ctx, logits, out)
    pl = c.t(logits, "logits")
    po, out = c.out(out, "indices", (U.shape(pl)[0], int(k)), DT.I32)
    c.check(_lib.lib().mla_topk(c.h, pl, c.t(lengths, "lengths"), int(k), po))
    return out


def indexer_head_weights(w, s_q, out=None, *, ctx=None):
    """w * s_q * 128^-0.5 * Hi^-0.5 in fp32: w [T, Hi] (BF16, F32), s_q
    [T, Hi] F32 -> [T, Hi] F32."""
    c = Call(ctx, w, out)
    pw = c.t(w, "w")
    po, out = c.out(out, "w_out", U.shape(pw), DT.F32)
    c.check(_lib.lib().mla_indexer_head_weights(c.h, pw, c.t(s_q, "s_q"), po))
    return out


class IndexerPlan(Handle):
    """A decode step's search data, validated once (mla_indexer_plan_create):
    ``search`` then runs logits + top-k with no index checks of its own, and
    can be captured in a CUDA/HIP graph after its first run."""

    _free = "mla_indexer_plan_destroy"

    def __init__(self, desc, block_table, context_lens, next_n=1, *, ctx=None):
        c = Call(ctx, block_table)
        h = ctypes.c_void_p()
        self.desc = desc
        c.check(_lib.lib().mla_indexer_plan_create(
            c.h, ctypes.byref(desc), c.t(block_table, "block_table"),
            c.t(context_lens, "context_lens"), int(next_n), ctypes.byref(h)))
        super().__init__(c.ctx, h.value)

    def update(self, block_table, context_lens):
        c = Call(self.ctx)
        c.check(_lib.lib().mla_indexer_plan_update(c.h, self.handle,
                                                   c.t(block_table, "block_table"),
                                                   c.t(context_lens, "context_lens")))

    @property
    def max_len(self):
        """The least logits.shape[1] a search takes."""
        return _lib.lib().mla_indexer_plan_max_len(self.handle)

    def search(self, cache, q, w, k, logits=None, indices=None):
        """(logits, indices [B*next_n, k] I32) for q, w over the cache."""
        fp8 = T.DType(self.desc.dtype)
        c = Call(self.ctx, q, logits)
        pq = c.t(q, "q", hint=fp8)
        rows = U.shape(pq)[0]
        pl, logits = c.out(logits, "logits", (rows, self.max_len), DT.F32)
        pi, indices = c.out(indices, "indices", (rows, int(k)), DT.I32)
        c.check(_lib.lib().mla_indexer_search(c.h, self.handle, c.t(cache, "cache"), pq,
                                              c.t(w, "w"), pl, int(k), pi))
        return logits, indices


def indexer_workspace_bytes(cfg, tokens):
    n = ctypes.c_int64()
    _lib.check(_lib.lib().mla_indexer_workspace_bytes(ctypes.byref(cfg), int(tokens),
                                                      ctypes.byref(n)))
    return n.value


def indexer_prepare(cfg, weights, q_lat_normed, x, positions, cos, sin, q_fp8=None, w_out=None,
                    k=None, workspace=None, *, style="neox", hadamard=False, fp8="e4m3fn",
                    k_dtype=None, ctx=None):
    """The V3.2 indexer's projections for T tokens -> (q_fp8 [T, Hi, 128],
    w_out [T, Hi] F32, k [T, 128]); ``weights`` a LayerWeights with an indexer."""
    c = Call(ctx, x, q_fp8)
    px = c.t(x, "x")
    T_ = U.shape(px)[0]
    fp8 = U.fp8_dtype(fp8)
    opt = T.IndexerOptions(int(U.enum(T.RopeStyle, style, "style")), 1 if hadamard else 0,
                           int(fp8))
    pq, q_fp8 = c.out(q_fp8, "q_fp8", (T_, cfg.index_heads, cfg.index_head_dim), fp8, hint=fp8)
    pw, w_out = c.out(w_out, "w_out", (T_, cfg.index_heads), DT.F32)
    kd = TS.dtype_of(k_dtype) if k_dtype is not None else U.dtype(px)
    pk, k = c.out(k, "k", (T_, cfg.index_head_dim), kd, hint=kd)
    if workspace is None:
        workspace = TS.empty_workspace(c.first, indexer_workspace_bytes(cfg, T_), c.ctx)
    pws = c.t(workspace, "workspace", out=True)
    U.need(weights.struct.has_indexer, S.ERR_INVALID_ARGUMENT, "weights",
           "these weights have no indexer")
    c.check(_lib.lib().mla_indexer_prepare(
        c.h, ctypes.byref(cfg), ctypes.byref(weights.struct.indexer), ctypes.byref(opt),
        c.t(q_lat_normed, "q_lat_normed"), px, c.t(positions, "positions"), c.t(cos, "cos"),
        c.t(sin, "sin"), pq, pw, pk, pws))
    return q_fp8, w_out, k
