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


def weights_generate(path, cfg, first=0, count=1, seed=0, formats=None, *, ctx=None):
    """Writes seeded random weights of layers first .. first + count - 1 of
    cfg to ``path`` with DeepSeek's names; ``formats`` a dict of projection
    -> "bf16" / "fp8_block" / "mxfp4" (default all bf16)."""
    f = None
    if formats:
        f = T.LayerWeightFormats()
        for k, v in formats.items():
            U.need(hasattr(f, k), S.ERR_INVALID_ARGUMENT, k, "no projection %r" % k)
            setattr(f, k, int(U.enum(T.WeightFormat, v, k)))
    _check(ctx, _lib.lib().mla_weights_generate(_ctx_handle(ctx), str(path).encode(),
                                                ctypes.byref(cfg), int(first), int(count),
                                                int(seed), ctypes.byref(f) if f else None))


class LayerWeights(Handle):
    """One attention layer's weights, loaded into the context's memory
    (mla_layer_weights_load): ``LayerWeights(ctx, files, cfg, layer)`` with
    a SafetensorsFile or a list of shards. ``formats`` says how each
    projection is stored; ``struct`` is the mla_layer_weights_ex."""

    def __init__(self, ctx, files, cfg, layer=0, *, kc_rule="production", prefix=None,
                 kv_b_fp8="keep"):
        opt = T.LayerLoadOptions()
        _lib.lib().mla_layer_load_options_default(ctypes.byref(opt))
        opt.kc_rule = int(U.enum(T.MxFp4Rule, kc_rule, "kc_rule"))
        self._prefix = prefix.encode() if prefix is not None else None
        opt.prefix = self._prefix
        opt.kv_b_fp8 = int(U.enum(T.KvBFp8, kv_b_fp8, "kv_b_fp8"))
        self.struct = T.LayerWeightsEx()
        self.cfg = T.ModelConfig.from_buffer_copy(cfg)
        if isinstance(files, SafetensorsFile):
            st = _lib.lib().mla_layer_weights_load(ctx.handle, files.handle, ctypes.byref(cfg),
                                                   int(layer), ctypes.byref(opt),
                                                   ctypes.byref(self.struct))
        else:
            arr = (ctypes.c_void_p * len(files))(*[f.handle for f in files])
            st = _lib.lib().mla_layer_weights_load_shards(ctx.handle, arr, len(files),
                                                          ctypes.byref(cfg), int(layer),
                                                          ctypes.byref(opt),
                                                          ctypes.byref(self.struct))
        ctx.check(st)
        super().__init__(ctx, True)
        self.id = id(self)
        torch_ops.weights[self.id] = self  # what torch.ops.libmla.layer_forward finds

    @property
    def formats(self):
        f = self.struct.formats
        return {name: T.WeightFormat(getattr(f, name)) for name, _ in f._fields_}

    def _release(self, h):
        _lib.lib().mla_layer_weights_free(self.ctx.handle, ctypes.byref(self.struct))

    def close(self):
        if self._h is not None and self._gen == _lib.generation() and not self.ctx.closed:
            self._release(self._h)
        self._h = None
