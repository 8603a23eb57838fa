"""PyTorch custom ops (PyTorch >= 2.4): ``torch.ops.libmla.attention_run``,
``attention_run_rope`` and ``layer_forward``, each with a fake (meta)
implementation, so that torch.compile traces a decode step through them as
single opaque ops and a CUDA/HIP graph capture records their kernels.

The plans are Python objects; an op receives the plan's id (an int) and
finds it in the plan module's registry. Outputs are allocated by the calling
wrapper (torch.empty, which a graph capture serves from its pool) and passed
in as mutated arguments (a compiler may hand the op copies of them and copy
back). What the C call writes through pointers the plan holds is the plan's
own state, not an argument: the workspace (scratch, 256-byte aligned, which a
copy would not be) and the layer's planned caches (a copy written back after
the call would undo the rows it wrote). RoPE inside attention writes the
cache it is passed, which is declared mutated.

Older PyTorch (Debian 12 ships 1.13) has no torch.library.custom_op: the same
methods then call the C library directly (no torch.compile support)."""

import sys
import weakref

_state = {"checked": False, "enabled": False}


def is_tensor(x):
    """x is a torch tensor (only asked once enabled(): no module lookup, so
    that torch.compile traces it as a plain isinstance)."""
    cls = _state.get("Tensor")
    return cls is not None and isinstance(x, cls)


def enabled():
    """True once the custom ops are registered (torch imported, >= 2.4)."""
    if not _state["checked"]:
        torch = sys.modules.get("torch")
        if torch is None:
            return False
        _state["checked"] = True
        ver = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]
                    if p.isdigit())
        if ver >= (2, 4) and hasattr(torch, "library") and hasattr(torch.library, "custom_op"):
            _register(torch)
            _state["enabled"] = True
            _state["Tensor"] = torch.Tensor
    return _state["enabled"]


def _register(torch):
    from typing import Optional

    from . import attention as A
    from . import layer as LY

    Tensor = torch.Tensor

    def _rope(cos, sin, q_pos, k_nope, k_pe, k_pos, slots, style):
        if cos is None:
            return None
        return {"cos": cos, "sin": sin, "q_pos": q_pos, "k_nope": k_nope, "k_pe": k_pe,
                "k_pos": k_pos, "slots": slots, "style": style}

    @torch.library.custom_op("libmla::attention_run", mutates_args=("o", "lse"))
    def attention_run(plan_id: int, q: Tensor, cache: Tensor, block_table: Optional[Tensor],
                      context_lens: Tensor, cu_q_lens: Optional[Tensor],
                      topk_indices: Optional[Tensor], sinks: Optional[Tensor], o: Tensor,
                      lse: Optional[Tensor]) -> None:
        A._plans[plan_id]._run(q, cache, block_table, context_lens, o, lse, cu_q_lens,
                               topk_indices, sinks, None, False)

    @attention_run.register_fake
    def _(plan_id, q, cache, block_table, context_lens, cu_q_lens, topk_indices, sinks, o, lse):
        return None

    @torch.library.custom_op("libmla::attention_run_rope", mutates_args=("cache", "o", "lse"))
    def attention_run_rope(plan_id: int, q: Tensor, cache: Tensor, block_table: Optional[Tensor],
                           context_lens: Tensor, cu_q_lens: Optional[Tensor],
                           topk_indices: Optional[Tensor], sinks: Optional[Tensor], o: Tensor,
                           lse: Optional[Tensor], cos: Tensor, sin: Tensor, q_pos: Tensor,
                           k_nope: Tensor, k_pe: Tensor, k_pos: Tensor, slots: Tensor,
                           style: int) -> None:
        A._plans[plan_id]._run(q, cache, block_table, context_lens, o, lse, cu_q_lens,
                               topk_indices, sinks,
                               _rope(cos, sin, q_pos, k_nope, k_pe, k_pos, slots, style), False)

    @attention_run_rope.register_fake
    def _(plan_id, q, cache, block_table, context_lens, cu_q_lens, topk_indices, sinks, o, lse,
          cos, sin, q_pos, k_nope, k_pe, k_pos, slots, style):
        return None

    @torch.library.custom_op("libmla::layer_forward", mutates_args=("y",))
    def layer_forward(plan_id: int, weights_id: int, x: Tensor, y: Tensor) -> None:
        LY._plans[plan_id]._forward(weights[weights_id], x, y, None)

    @layer_forward.register_fake
    def _(plan_id, weights_id, x, y):
        return None

    _ops.update(attention_run=attention_run, attention_run_rope=attention_run_rope,
                layer_forward=layer_forward)


_ops = {}
weights = weakref.WeakValueDictionary()  # id -> LayerWeights (registered at load)


def attention_run(plan, q, cache, block_table, context_lens, o, lse, cu_q_lens, topk_indices,
                  sinks, rope, return_lse):
    """AttentionPlan.run through the custom op (traceable: it reads only plain
    attributes of the plan)."""
    import torch
    if o is None:
        o = torch.empty(plan.o_shape, dtype=plan.o_torch_dtype, device=q.device)
    if lse is None and return_lse:
        lse = torch.empty(plan.lse_shape, dtype=torch.float32, device=q.device)
    common = (plan.id, q, cache, block_table, context_lens, cu_q_lens, topk_indices, sinks, o,
              lse)
    if rope is None:
        _ops["attention_run"](*common)
    else:
        style = rope.get("style", 0)
        if not isinstance(style, int):  # a name
            style = 1 if str(style).lower() == "neox" else 0
        _ops["attention_run_rope"](*common, rope["cos"], rope["sin"], rope["q_pos"],
                                   rope["k_nope"], rope["k_pe"], rope["k_pos"], rope["slots"],
                                   style)
    return (o, lse) if return_lse else o


def layer_forward(lp, w, x, y, dtype):
    """LayerPlan.forward through the custom op."""
    import torch
    if y is None:
        dt = x.dtype if dtype is None else _storage(dtype)
        y = torch.empty((lp.tokens, lp.hidden), dtype=dt, device=x.device)
    _ops["layer_forward"](lp.id, w.id, x, y)
    return y


def _storage(dtype):
    from . import _tensor as TS
    return TS._torch_storage(TS.dtype_of(dtype))
