"""The whole MLA attention layer (include/mla/mla_layer.h, docs/LAYER.md):
plan a step (prefill chunk or decode) over the caller's buffers, then run
the forward x [T, hidden] -> y [T, hidden].

On PyTorch >= 2.4, ``LayerPlan.forward`` with torch tensors goes through the
custom op ``torch.ops.libmla.layer_forward`` (libmla/torch_ops.py)."""

import ctypes
import weakref

from . import _lib
from . import _tensor as TS
from . import _types as T
from . import _util as U
from . import torch_ops
from .context import Call, Handle

S = T.Status
DT = T.DType
LayerOptions = T.LayerOptions
_plans = weakref.WeakValueDictionary()  # id -> plan, for the torch custom op


def layer_options(cfg, cache_desc, **fields):
    """mla_layer_options_default with fields overridden: ``act`` ("bf16" or
    "f32"), ``dense``, ``num_splits``; the indexer's ``indexer`` and
    ``index_cache`` structs can be edited on the result."""
    o = LayerOptions()
    _lib.lib().mla_layer_options_default(ctypes.byref(cfg), ctypes.byref(cache_desc),
                                         ctypes.byref(o))
    for k, v in fields.items():
        U.need(hasattr(o, k), S.ERR_INVALID_ARGUMENT, k, "mla_layer_options has no field %r" % k)
        setattr(o, k, int(TS.dtype_of(v)) if k == "act" else v)
    return o


def layer_workspace_bytes(ctx, plan, opt, tokens, seqs, max_context):
    n = ctypes.c_int64()
    ctx.check(_lib.lib().mla_layer_workspace_bytes(ctx.handle, plan.handle, ctypes.byref(opt),
                                                   int(tokens), int(seqs), int(max_context),
                                                   ctypes.byref(n)))
    return n.value


class LayerPlan(Handle):
    """One planned step of a layer (mla_layer_plan_create).

    Args:
        plan: the RoPE-once libmla.Plan of the model on the context's target.
        cache_desc: the latent cache's descriptor (matching the plan).
        opt: LayerOptions (layer_options(cfg, cache_desc)).
        positions, slots: [T] I32/I64, each new token's position and slot.
        block_table [S, max_blocks] I32, context_lens [S] I32 (this step's
            tokens included), cu_q_lens [S + 1] I32 or None (next_n each).
        max_context: bounds every context length of the plan's life.
        cos, sin: the model's RoPE table; cache: U8 [num_blocks, block_bytes];
        index_cache: the V3.2 indexer's K cache (sparse layers), else None;
        workspace: U8, at least layer_workspace_bytes (allocated when None).

    The plan reads these buffers at every forward: they are kept here, and
    ``update`` replaces the batch for the next step (same T and S)."""

    def __init__(self, plan, cache_desc, opt, *, positions, slots, block_table, context_lens,
                 max_context, cos, sin, cache, index_cache=None, workspace=None, cu_q_lens=None,
                 next_n=1, ctx=None):
        c = Call(ctx, cache, positions)
        self.plan, self.cache_desc, self.opt = plan, cache_desc, LayerOptions.from_buffer_copy(opt)
        T_ = U.shape(c.t(positions, "positions"))[0]
        S_ = U.shape(c.t(context_lens, "context_lens"))[0]
        if workspace is None:
            n = layer_workspace_bytes(c.ctx, plan, self.opt, T_, S_, max_context)
            workspace = TS.empty_workspace(cache, n, c.ctx)
        self.buffers = (cos, sin, cache, index_cache, workspace)
        b = T.LayerBuffers(c.t(cos, "cos"), c.t(sin, "sin"), c.t(cache, "cache", out=True),
                           c.t(index_cache, "index_cache", out=True),
                           c.t(workspace, "workspace", out=True))
        batch = self._batch(c, positions, slots, block_table, context_lens, cu_q_lens, next_n)
        h = ctypes.c_void_p()
        c.check(_lib.lib().mla_layer_plan_create(c.h, plan.handle, ctypes.byref(cache_desc),
                                                 ctypes.byref(self.opt), ctypes.byref(batch),
                                                 int(max_context), ctypes.byref(b),
                                                 ctypes.byref(h)))
        super().__init__(c.ctx, h.value)
        self.tokens, self.hidden = T_, plan.config.hidden
        self.id = id(self)
        _plans[self.id] = self
        torch_ops.enabled()  # registers the custom ops before any tracing

    _free = "mla_layer_plan_destroy"

    def _batch(self, c, positions, slots, block_table, context_lens, cu_q_lens, next_n):
        self.batch_objects = (positions, slots, block_table, context_lens, cu_q_lens)
        return T.LayerBatch(c.t(positions, "positions"), c.t(slots, "slots"),
                            c.t(block_table, "block_table"), c.t(context_lens, "context_lens"),
                            c.t(cu_q_lens, "cu_q_lens"), int(next_n))

    def update(self, positions, slots, block_table, context_lens, cu_q_lens=None, next_n=1):
        """The next step's batch (same T and S): validated, nothing allocated."""
        c = Call(self.ctx, positions)
        batch = self._batch(c, positions, slots, block_table, context_lens, cu_q_lens, next_n)
        c.check(_lib.lib().mla_layer_plan_update(c.h, self.handle, ctypes.byref(batch)))

    @property
    def sparse(self):
        """True when the forward runs the indexer and sparse attention."""
        return bool(_lib.lib().mla_layer_plan_sparse(self.handle))

    def topk(self, copy=False):
        """Sparse plans: the top-k indices the last forward attended to,
        [T, index_topk] int32 (logical positions, -1 padded): a view into the
        planned workspace, valid until the next forward (``copy=True``: a
        NumPy copy). A dense plan raises."""
        t = T.Tensor()
        st = _lib.lib().mla_layer_plan_topk(self.handle, ctypes.byref(t))
        U.need(st == 0, st, "lp", "a dense plan has no top-k indices")
        shape = (t.shape[0], t.shape[1])
        ws = self.buffers[4]
        off = t.data - TS.describe(ws, "workspace").ptr
        n = shape[0] * shape[1] * 4
        if copy:
            import numpy as np
            out = np.empty(shape, np.int32)
            if n:
                self.ctx.synchronize()
                self.ctx.check(_lib.lib().mla_memcpy(self.ctx.handle, out.ctypes.data, t.data,
                                                     n, int(T.CopyKind.CONTEXT_TO_HOST)))
            return out
        if hasattr(ws, "_view"):  # a DeviceArray
            return ws._view(off, shape, DT.I32)
        part = ws[off:off + n]
        torch = TS._torch()
        if torch is not None and isinstance(ws, torch.Tensor):
            return part.view(torch.int32).reshape(shape)
        return part.view("int32").reshape(shape)

    def forward(self, weights, x, y=None, *, dtype=None):
        """y [T, hidden] (BF16 or F32; a new tensor like x when None) for x
        [T, hidden] in opt.act, writing every new token's latent row (and
        indexer K) into the planned caches."""
        if torch_ops.enabled() and torch_ops.is_tensor(x):
            return torch_ops.layer_forward(self, weights, x, y, dtype)
        return self._forward(weights, x, y, dtype)

    def _forward(self, weights, x, y, dtype):
        c = Call(self.ctx, x, y)
        px = c.t(x, "x")
        dt = TS.dtype_of(dtype) if dtype is not None else U.dtype(px)
        py, y = c.out(y, "y", (self.tokens, self.hidden), dt, hint=dt)
        weights.handle  # raises when the weights were freed
        c.check(_lib.lib().mla_layer_forward(c.h, self.handle, ctypes.byref(weights.struct), px,
                                             py))
        return y
