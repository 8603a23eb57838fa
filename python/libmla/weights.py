"""safetensors files (read and write), the DeepSeek attention-layer weight
loader and the seeded weight generator (include/mla/mla_weights.h)."""

import ctypes

from . import _lib
from . import _tensor as TS
from . import _types as T
from . import _util as U
from . import torch_ops
from .context import Call, Handle, default_context

S = T.Status
DT = T.DType


def _ctx_handle(ctx):
    """The context that records a refusal: the given one, else the calling
    thread's default host context (these calls touch host memory only)."""
    return (ctx or default_context()).handle


def _check(ctx, st):
    _lib.check(st, _ctx_handle(ctx))


class SafetensorsFile(Handle):
    """A safetensors file open for reading (the header is parsed and checked
    at open; data is read on demand). ``names``, ``info(name)``, ``in``,
    ``metadata(key)``, ``read(name)``."""

    _free = "mla_safetensors_close"

    def __init__(self, path, *, ctx=None):
        h = ctypes.c_void_p()
        _check(ctx, _lib.lib().mla_safetensors_open(_ctx_handle(ctx), str(path).encode(),
                                                    ctypes.byref(h)))
        super().__init__(ctx, h.value)
        self.path = str(path)

    def __len__(self):
        return _lib.lib().mla_safetensors_count(self.handle)

    def _info(self, i):
        info = T.SafetensorsInfo()
        _lib.check(_lib.lib().mla_safetensors_info_at(self.handle, i, ctypes.byref(info)))
        return info

    @property
    def names(self):
        return [self._info(i).name.decode() for i in range(len(self))]

    def __contains__(self, name):
        return bool(_lib.lib().mla_safetensors_has(self.handle, name.encode()))

    def info(self, name):
        """(dtype, shape, file_dtype) of a tensor."""
        info = T.SafetensorsInfo()
        _check(self.ctx, _lib.lib().mla_safetensors_find(_ctx_handle(self.ctx), self.handle,
                                                         name.encode(), ctypes.byref(info)))
        return T.DType(info.dtype), tuple(info.shape[:info.ndim]), info.file_dtype.decode()

    def metadata(self, key):
        """The __metadata__ value of key, None when absent."""
        v = _lib.lib().mla_safetensors_metadata(self.handle, key.encode())
        return v.decode() if v is not None else None

    def read(self, name, out=None, *, ctx=None):
        """Tensor ``name`` into ``out`` (host, or the context's memory), or a
        new NumPy array (bf16 as uint16, fp8 / e8m0 as uint8)."""
        ctx = ctx or self.ctx
        dt, shape, _ = self.info(name)
        c = Call(ctx or default_context(), out)
        po, out = c.out(out, name, shape, dt, hint=dt)
        _check(c.ctx, _lib.lib().mla_safetensors_read(c.h, self.handle, name.encode(), po))
        return out


class SafetensorsWriter(Handle):
    """Builds a safetensors file: ``add(name, array)`` copies a contiguous host
    tensor's bytes, ``metadata(key, value)``, ``save(path)``."""

    _free = "mla_safetensors_writer_destroy"

    def __init__(self, *, ctx=None):
        h = ctypes.c_void_p()
        _check(ctx, _lib.lib().mla_safetensors_writer_create(_ctx_handle(ctx), ctypes.byref(h)))
        super().__init__(ctx, h.value)

    def add(self, name, array, dtype=None):
        """Adds a contiguous host tensor (dtype: its libmla dtype when the
        array's own says nothing, e.g. "bf16" for a uint16 array)."""
        obj = TS.view(array, dtype) if dtype is not None else array
        d = TS.describe(obj.obj if isinstance(obj, TS.View) else obj, name)
        dt = TS.resolve_dtype(d, name, obj.dtype if isinstance(obj, TS.View) else None)
        U.need(d.device == "host", S.ERR_WRONG_DEVICE, name, "%s: the writer takes host memory"
               % name)
        contiguous = TS._byte_strides(name, d.shape, None, 1)
        U.need(tuple(d.strides) == contiguous, S.ERR_STRIDE, name,
               "%s must be contiguous (the writer copies its bytes as they lie)" % name)
        shape = (ctypes.c_int64 * max(len(d.shape), 1))(*d.shape)
        _check(self.ctx, _lib.lib().mla_safetensors_writer_add(
            _ctx_handle(self.ctx), self.handle, name.encode(), int(dt), len(d.shape), shape,
            d.ptr))

    def metadata(self, key, value):
        _check(self.ctx, _lib.lib().mla_safetensors_writer_metadata(
            _ctx_handle(self.ctx), self.handle, key.encode(), value.encode()))

    def save(self, path):
        _check(self.ctx, _lib.lib().mla_safetensors_writer_save(_ctx_handle(self.ctx),
                                                                self.handle, str(path).encode()))


def layer_weight_formats(formats):
    """A LayerWeightFormats struct from a dict of projection -> format
    ("bf16" / "fp8_block" / "mxfp4"; others stay bf16), or None for None."""
    if not formats:
        return None
    f = T.LayerWeightFormats()
    for k, v in formats.items():
        U.need(hasattr(f, k), S.ERR_INVALID_ARGUMENT, k, "no projection %r (one of %s)"
               % (k, ", ".join(n for n, _ in f._fields_)))
        setattr(f, k, int(U.enum(T.WeightFormat, v, k)))
    return f


def weights_generate(path, cfg, first=0, count=1, seed=0, formats=None, *, ctx=None):
    """Writes seeded random weights of layers first .. first + count - 1 of
    cfg to ``path`` with DeepSeek's names; ``formats`` a dict of projection
    -> "bf16" / "fp8_block" / "mxfp4" (default all bf16)."""
    f = layer_weight_formats(formats)
    _check(ctx, _lib.lib().mla_weights_generate(_ctx_handle(ctx), str(path).encode(),
                                                ctypes.byref(cfg), int(first), int(count),
                                                int(seed), ctypes.byref(f) if f else None))


def load_options(*, kc_rule="production", prefix=None, kv_b_fp8="keep", rank=0, world_size=1,
                 check_only=False):
    """An mla_layer_load_options (defaults from the library, then these)."""
    opt = T.LayerLoadOptions()
    _lib.lib().mla_layer_load_options_default(ctypes.byref(opt))
    opt.kc_rule = int(U.enum(T.MxFp4Rule, kc_rule, "kc_rule"))
    opt.prefix = prefix.encode() if prefix is not None else None
    opt.kv_b_fp8 = int(U.enum(T.KvBFp8, kv_b_fp8, "kv_b_fp8"))
    opt.rank, opt.world_size = int(rank), int(world_size)
    opt.check_only = int(bool(check_only))
    return opt


class LayerWeights(Handle):
    """One attention layer's weights, loaded into the context's memory.

    ``LayerWeights(ctx, files, cfg, layer)`` loads from a SafetensorsFile or
    a list of shards (mla_layer_weights_load); a Hugging Face checkpoint
    directory loads through libmla.load_checkpoint / Checkpoint.load_layer.

    Keywords: ``kc_rule`` (the W_kc re-quantization of an MXFP4 kv_b_proj),
    ``prefix`` (tensor names; default ``model.layers.<layer>.self_attn.``),
    ``kv_b_fp8`` ("keep", "to_bf16", "to_tensor": what becomes of an fp8
    kv_b_proj), ``rank`` / ``world_size`` (one tensor-parallel rank's heads,
    docs/TENSOR_PARALLEL.md), ``check_only`` (find and check every tensor,
    fill the descriptors, read and allocate nothing).

    ``config`` is the ModelConfig to plan with (a rank's: heads / world_size),
    ``rank`` and ``world_size`` the slice loaded, ``formats`` how each
    projection is stored, ``struct`` the mla_layer_weights_ex."""

    def __init__(self, ctx, files, cfg, layer=0, **options):
        self._options = opt = load_options(**options)
        self.struct = T.LayerWeightsEx()
        if isinstance(files, SafetensorsFile):
            st = _lib.lib().mla_layer_weights_load(ctx.handle, files.handle, ctypes.byref(cfg),
                                                   int(layer), ctypes.byref(opt),
                                                   ctypes.byref(self.struct))
        elif hasattr(files, "_load_layer"):  # a Checkpoint: its own config
            st = files._load_layer(ctx, int(layer), opt, self.struct)
        else:
            arr = (ctypes.c_void_p * len(files))(*[f.handle for f in files])
            st = _lib.lib().mla_layer_weights_load_shards(ctx.handle, arr, len(files),
                                                          ctypes.byref(cfg), int(layer),
                                                          ctypes.byref(opt),
                                                          ctypes.byref(self.struct))
        ctx.check(st)
        super().__init__(ctx, True)
        self.layer = int(layer)
        self.check_only = bool(opt.check_only)
        self.id = id(self)
        torch_ops.weights[self.id] = self  # what torch.ops.libmla.layer_forward finds

    @property
    def formats(self):
        f = self.struct.formats
        return {name: T.WeightFormat(getattr(f, name)) for name, _ in f._fields_}

    @property
    def config(self):
        """The ModelConfig these weights are planned with (a TP rank's heads)."""
        return T.ModelConfig.from_buffer_copy(self.struct.config)

    @property
    def rank(self):
        """The tensor-parallel rank loaded (0 for the whole layer)."""
        return int(self.struct.tp_rank)

    @property
    def world_size(self):
        """The tensor-parallel world size loaded (1 for the whole layer)."""
        return int(self.struct.tp_world_size)

    def check_tp(self, rank, world_size):
        """Raises libmla.Error naming ``weights.tp_rank`` or
        ``weights.tp_world_size`` unless these weights are rank ``rank``'s
        slice of a ``world_size``-way split (a process must run its own
        rank's heads: another rank's would sum to a wrong y silently)."""
        U.need(self.world_size == int(world_size), S.ERR_INVALID_ARGUMENT, "weights.tp_world_size",
               "the weights were loaded for world size %d, the process group has %d"
               % (self.world_size, int(world_size)))
        U.need(self.rank == int(rank), S.ERR_INVALID_ARGUMENT, "weights.tp_rank",
               "the weights are rank %d's heads, this is rank %d" % (self.rank, int(rank)))

    _HOST = {"q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj",
             "q_a_layernorm", "kv_a_layernorm"}

    def host(self, name):
        """A NumPy copy of a loaded tensor: a projection's weight (``"o_proj"``,
        bf16 as uint16, fp8 / fp4x2 codes as uint8), its scale
        (``"o_proj.scale"``: fp8 block scales F32, MXFP4 e8m0 as uint8), or a
        norm's weight (``"kv_a_layernorm"``)."""
        import numpy as np
        base, _, part = name.partition(".")
        U.need(base in self._HOST and part in ("", "scale") and not (
            part and base.endswith("layernorm")), S.ERR_INVALID_ARGUMENT, "name",
            "%r: one of %s, or a projection's '.scale'" % (name, ", ".join(sorted(self._HOST))))
        U.need(not self.check_only, S.ERR_INVALID_ARGUMENT, "name",
               "check_only weights hold no data")
        obj = getattr(self.struct.base, base)
        t = obj if isinstance(obj, T.Tensor) else (obj.scale if part else obj.w)
        shape = tuple(t.shape[i] for i in range(t.ndim))
        out = np.empty(shape, dtype=TS._numpy_storage(T.DType(t.dtype)))
        if out.size and t.data:
            U.need(tuple(t.stride[i] for i in range(t.ndim)) == tuple(
                s // out.itemsize for s in out.strides), S.ERR_STRIDE, name,
                "%s is a strided view" % name)
            self.ctx.check(_lib.lib().mla_memcpy(self.ctx.handle, out.ctypes.data, t.data,
                                                 out.nbytes, int(T.CopyKind.CONTEXT_TO_HOST)))
        return out

    def _release(self, h):
        if not self.check_only:
            _lib.lib().mla_layer_weights_free(self.ctx.handle, ctypes.byref(self.struct))

    def close(self):
        if self._h is not None and self._gen == _lib.generation() and not self.ctx.closed:
            self._release(self._h)
        self._h = None
