"""The MLA attention core (include/mla/mla_attention.h): a plan validated once
per step's index data, and a run that allocates nothing and never waits,
so it can be captured in a CUDA/HIP graph.

On PyTorch >= 2.4, ``AttentionPlan.run`` with torch tensors goes through the
custom op ``torch.ops.libmla.attention_run`` (libmla/torch_ops.py), which
torch.compile treats as one opaque op with a fake implementation."""

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
AttentionDesc = T.AttentionDesc

_DESC_DTYPES = ("q_dtype", "out_dtype")
_plans = weakref.WeakValueDictionary()  # id -> plan, for the torch custom ops


def attention_desc(cfg, cache_desc, **fields):
    """mla_attention_desc_default(cfg, cache_desc) with fields overridden
    (``heads``, ``q_dtype="bf16"``, ``out_dtype``, ``topk``, ``next_n``,
    ``num_splits``, ``paged``, ``q_scale``, ``softmax_scale``)."""
    d = AttentionDesc()
    _lib.check(_lib.lib().mla_attention_desc_default(ctypes.byref(cfg), ctypes.byref(cache_desc),
                                                     ctypes.byref(d)))
    for k, v in fields.items():
        U.need(hasattr(d, k), S.ERR_INVALID_ARGUMENT, k, "mla_attention_desc has no field %r" % k)
        setattr(d, k, int(TS.dtype_of(v)) if k in _DESC_DTYPES else v)
    return d


_ROPE_KEYS = ("cos", "sin", "q_pos", "k_nope", "k_pe", "k_pos", "slots")


class AttentionPlan(Handle):
    """``AttentionPlan(desc, q, cache, block_table, context_lens, ...)``:
    validates every index value the runs will read and builds the split-KV
    schedule (mla_attention_plan_create; may synchronize). ``q``'s data may be
    uninitialised; its shape [T, H, L + R] fixes the runs'.

    Optional: ``cu_q_lens`` [S + 1], ``topk_indices`` [T, topk] (sparse),
    ``sinks`` [H], ``rope`` (RoPE inside attention: a dict of cos, sin,
    q_pos, k_nope, k_pe, k_pos, slots and ``style``). The plan owns its
    workspace (``workspace``, in the context's memory)."""

    _free = "mla_attention_plan_destroy"

    def __init__(self, desc, q, cache, block_table, context_lens, *, cu_q_lens=None,
                 topk_indices=None, sinks=None, rope=None, ctx=None):
        self.desc = AttentionDesc.from_buffer_copy(desc)
        c = Call(ctx, q, cache)
        args, keep = self._args(c, q, cache, block_table, context_lens, cu_q_lens, topk_indices,
                                sinks, rope, None, None, None)
        h = ctypes.c_void_p()
        c.check(_lib.lib().mla_attention_plan_create(c.h, ctypes.byref(self.desc),
                                                     ctypes.byref(args), ctypes.byref(h)))
        super().__init__(c.ctx, h.value)
        n = max(self.workspace_bytes, 256)
        self.workspace = TS.empty_workspace(c.first, n, c.ctx)
        # plain attributes: what the torch custom-op path reads while being traced
        self.rows, self.heads = U.shape(args.q)[0], self.desc.heads
        self.o_shape = (self.rows, self.heads, self.desc.cache.kv_lora)
        self.lse_shape = (self.rows, self.heads)
        self.id = id(self)
        _plans[self.id] = self
        if torch_ops.enabled():
            self.o_torch_dtype = TS._torch_storage(T.DType(self.desc.out_dtype))

    @property
    def workspace_bytes(self):
        return _lib.lib().mla_attention_plan_workspace_bytes(self.handle)

    @property
    def splits(self):
        """The largest split count of any sequence (1: no split-KV)."""
        return _lib.lib().mla_attention_plan_splits(self.handle)

    def _args(self, c, q, cache, block_table, context_lens, cu_q_lens, topk_indices, sinks,
              rope, o, lse, workspace):
        a = T.AttentionArgs()
        a.q = c.t(q, "q", hint=T.DType(self.desc.q_dtype))
        a.cache = c.t(cache, "cache", out=rope is not None)
        a.block_table = c.t(block_table, "block_table")
        a.context_lens = c.t(context_lens, "context_lens")
        a.cu_q_lens = c.t(cu_q_lens, "cu_q_lens")
        a.topk_indices = c.t(topk_indices, "topk_indices")
        a.sinks = c.t(sinks, "sinks")
        keep = None
        if rope is not None:
            r = T.AttentionRope()
            for k in _ROPE_KEYS:
                U.need(k in rope, S.ERR_NULL_POINTER, "rope." + k, "rope needs %s" % k)
                setattr(r, k, c.t(rope[k], "rope." + k))
            r.style = int(U.enum(T.RopeStyle, rope.get("style", "interleaved"), "rope.style"))
            a.rope = ctypes.pointer(r)
            keep = r
        shape_o = (U.shape(a.q)[0], self.desc.heads, self.desc.cache.kv_lora)
        if o is None:
            o = TS.empty(c.first, shape_o, T.DType(self.desc.out_dtype), c.ctx)
        a.o, _ = c.out(o, "o", shape_o, T.DType(self.desc.out_dtype))
        if lse is not None:
            a.lse, _ = c.out(lse, "lse", shape_o[:2], DT.F32)
        if workspace is not None:
            a.workspace = c.t(workspace, "workspace", out=True)
        c.keep.append(keep)
        return a, o

    def update(self, q, cache, block_table, context_lens, *, cu_q_lens=None, topk_indices=None,
               sinks=None, rope=None):
        """Re-plans for new index data of the same shapes, into the same
        buffers (a captured graph of run stays valid)."""
        c = Call(self.ctx, q)
        args, _ = self._args(c, q, cache, block_table, context_lens, cu_q_lens, topk_indices,
                             sinks, rope, None, None, None)
        c.check(_lib.lib().mla_attention_plan_update(c.h, self.handle, ctypes.byref(args)))

    def run(self, q, cache, block_table, context_lens, o=None, lse=None, *, cu_q_lens=None,
            topk_indices=None, sinks=None, rope=None, return_lse=False):
        """Attends (mla_attention_run) and returns o [T, H, L] (and lse [T, H]
        with ``return_lse``): written into o / lse when given, else new
        tensors like q. The index tensors must be those the plan (or its last
        update) saw, unchanged."""
        if torch_ops.enabled() and torch_ops.is_tensor(q):
            return torch_ops.attention_run(self, q, cache, block_table, context_lens, o, lse,
                                           cu_q_lens, topk_indices, sinks, rope, return_lse)
        return self._run(q, cache, block_table, context_lens, o, lse, cu_q_lens, topk_indices,
                         sinks, rope, return_lse)

    def _run(self, q, cache, block_table, context_lens, o, lse, cu_q_lens, topk_indices, sinks,
             rope, return_lse):
        c = Call(self.ctx, q)
        if lse is None and return_lse:
            lse = TS.empty(q, (self.rows, self.heads), DT.F32, c.ctx)
        args, o = self._args(c, q, cache, block_table, context_lens, cu_q_lens, topk_indices,
                             sinks, rope, o, lse, self.workspace)
        c.check(_lib.lib().mla_attention_run(c.h, self.handle, ctypes.byref(args)))
        return (o, lse) if return_lse else o
