"""Hugging Face checkpoints (include/mla/mla_weights.h, docs/CHECKPOINTS.md):
config.json, checkpoint directories (one model.safetensors, or shards and
model.safetensors.index.json) loaded one layer at a time, optionally as one
tensor-parallel rank's heads, and the seeded checkpoint generator.

    cfg = libmla.ModelConfig.from_hf("/models/DeepSeek-V3")     # or config.json, a dict
    w = libmla.load_checkpoint("/models/DeepSeek-V3", layer=3, rank=0, world_size=8,
                               backend="hip")
    w.config.heads, w.rank, w.world_size                        # 16, 0, 8
"""

import ctypes
import json
import os

from . import _lib
from . import _types as T
from . import _util as U
from .context import Call, Context, Handle, default_context
from .weights import LayerWeights, layer_weight_formats

S = T.Status
HfConfig = T.HfConfig


def _handle(ctx):
    return (ctx or default_context()).handle


def _check(ctx, st):
    _lib.check(st, _handle(ctx))


def hf_config(source, *, ctx=None):
    """Parses a model's config.json (mla_hf_config_parse) -> HfConfig.

    source: a path to config.json or to the checkpoint directory holding it,
    a dict (the parsed JSON), or the JSON text (str or bytes). HfConfig has
    ``model`` (the ModelConfig, all heads), ``num_layers``, ``model_type``,
    ``quant_method`` and ``fp8_block``. A refused field raises libmla.Error
    naming it (``rope_scaling.factor``)."""
    out = HfConfig()
    if isinstance(source, dict):
        source = json.dumps(source)
    if isinstance(source, str) and source.lstrip().startswith("{"):
        source = source.encode()
    if isinstance(source, (bytes, bytearray)):
        text = bytes(source)
        _check(ctx, _lib.lib().mla_hf_config_parse(_handle(ctx), text, len(text),
                                                   ctypes.byref(out)))
        return out
    path = os.fspath(source)
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    _check(ctx, _lib.lib().mla_hf_config_load(_handle(ctx), path.encode(), ctypes.byref(out)))
    return out


def model_config_preset_json(name):
    """The config.json text of a preset (its published fields for the real
    models); hf_config of it gives the preset back."""
    v = _lib.lib().mla_model_config_preset_json(str(name).encode())
    U.need(v is not None, S.ERR_INVALID_ARGUMENT, "name", "%r is not a preset" % (name,))
    return v.decode()


class Checkpoint(Handle):
    """A checkpoint directory in the Hugging Face layout (mla_checkpoint_open):
    config.json and the index are read at open, a shard's header when one of
    its tensors is first asked for, and only the asked tensors' bytes.

    ``config`` (HfConfig), ``names`` / ``shard(name)`` / ``in`` (the index),
    ``info(name)``, ``read(name)``, ``bytes_read``, ``load_layer(layer,
    rank=, world_size=, ...)``."""

    _free = "mla_checkpoint_close"

    def __init__(self, path, *, ctx=None):
        h = ctypes.c_void_p()
        _check(ctx, _lib.lib().mla_checkpoint_open(_handle(ctx), os.fspath(path).encode(),
                                                   ctypes.byref(h)))
        super().__init__(ctx, h.value)
        self.path = os.fspath(path)
        self._index = None

    @property
    def config(self):
        """The directory's HfConfig (a copy)."""
        return HfConfig.from_buffer_copy(_lib.lib().mla_checkpoint_config(self.handle).contents)

    def __len__(self):
        return _lib.lib().mla_checkpoint_tensor_count(self.handle)

    def _entry(self, i):
        name, shard = ctypes.c_char_p(), ctypes.c_char_p()
        _lib.check(_lib.lib().mla_checkpoint_tensor_at(self.handle, i, ctypes.byref(name),
                                                       ctypes.byref(shard)))
        return name.value.decode(), shard.value.decode()

    @property
    def index(self):
        """{tensor name: shard file name}, every tensor of the directory
        (read once: the index does not change after open)."""
        if self._index is None:
            self._index = dict(self._entry(i) for i in range(len(self)))
        return dict(self._index)

    @property
    def names(self):
        """The index's tensor names, sorted."""
        return list(self.index)

    def __contains__(self, name):
        return name in self.index

    def shard(self, name):
        """The file within the directory that holds tensor ``name``."""
        sh = self.index.get(name)
        U.need(sh is not None, S.ERR_FORMAT, name, "the checkpoint has no tensor %r" % name)
        return sh

    def _find(self, ctx, name):
        f, info = ctypes.c_void_p(), T.SafetensorsInfo()
        _check(ctx, _lib.lib().mla_checkpoint_find(_handle(ctx), self.handle, name.encode(),
                                                   ctypes.byref(f), ctypes.byref(info)))
        return f.value, info

    def info(self, name):
        """(dtype, shape, file_dtype) of a tensor (opens its shard's header)."""
        _, info = self._find(self.ctx, name)
        return T.DType(info.dtype), tuple(info.shape[:info.ndim]), info.file_dtype.decode()

    def read(self, name, out=None, *, ctx=None):
        """Tensor ``name`` into ``out`` (host, or the context's memory), or a
        new NumPy array (bf16 as uint16, fp8 / e8m0 as uint8)."""
        ctx = ctx or self.ctx or default_context()
        f, info = self._find(ctx, name)
        dt = T.DType(info.dtype)
        c = Call(ctx, out)
        po, out = c.out(out, name, tuple(info.shape[:info.ndim]), dt, hint=dt)
        c.check(_lib.lib().mla_safetensors_read(c.h, f, name.encode(), po))
        return out

    @property
    def bytes_read(self):
        """Bytes read from the shards so far, their headers included."""
        return _lib.lib().mla_checkpoint_bytes_read(self.handle)

    def _load_layer(self, ctx, layer, opt, out):
        return _lib.lib().mla_layer_weights_load_checkpoint(ctx.handle, self.handle, layer,
                                                            ctypes.byref(opt), ctypes.byref(out))

    def load_layer(self, layer=0, *, ctx=None, **options):
        """Layer ``layer``'s attention weights with the directory's config
        (mla_layer_weights_load_checkpoint) -> LayerWeights in ctx's memory.
        Options as LayerWeights: rank, world_size, kv_b_fp8, kc_rule, prefix,
        check_only."""
        ctx = ctx or self.ctx or default_context()
        self.handle  # raises when closed
        return LayerWeights(ctx, self, None, layer, **options)


def load_checkpoint(path, layer=0, *, rank=0, world_size=1, ctx=None, backend=None, device=0,
                    **options):
    """Loads one layer of a Hugging Face checkpoint directory -> LayerWeights.

    rank / world_size: tensor parallelism, rank ``rank``'s heads [r H/W,
    (r+1) H/W) (q_b_proj and kv_b_proj rows, o_proj columns, their scales
    with them); its forward gives that rank's partial o_proj output, the sum
    over ranks is the layer's y. Refused with libmla.Error naming
    ``options.world_size`` (H % W != 0), ``options.rank``, or the tensor whose
    fp8 / MXFP4 blocks the split would cut.

    ctx: the context to load into (its memory: the host, or its GPU);
    without it, a new ``Context(backend, device=device)`` when backend is
    given, else the default CPU context. ``weights.ctx`` is the context.
    Other options: kv_b_fp8, kc_rule, prefix, check_only (LayerWeights)."""
    if ctx is None:
        ctx = Context(backend, device=device) if backend is not None else default_context()
    with Checkpoint(path, ctx=ctx) as ck:
        return ck.load_layer(layer, ctx=ctx, rank=rank, world_size=world_size, **options)


def checkpoint_generate(path, cfg, *, first=0, count=1, seed=0, formats=None, shards=1,
                        num_layers=0, progress=None, ctx=None):
    """Writes a seeded random checkpoint directory in the Hugging Face layout
    (mla_checkpoint_generate): config.json and model.safetensors, or
    ``shards`` shards with model.safetensors.index.json.

    cfg: a ModelConfig, an HfConfig or a preset name; layers first .. first
    + count - 1; formats: a dict projection -> "bf16" / "fp8_block" /
    "mxfp4"; num_layers: config.json's num_hidden_layers (0: first + count);
    progress: called as progress(done_bytes, total_bytes) after each tensor
    (an exception it raises is raised when the call returns)."""
    if isinstance(cfg, str):
        from .prepare import model_config
        cfg = model_config(cfg)
    elif isinstance(cfg, HfConfig):
        cfg = cfg.model
    opt = T.GenerateOptions()
    _lib.lib().mla_generate_options_default(ctypes.byref(opt))
    opt.first, opt.count, opt.seed = int(first), int(count), int(seed)
    f = layer_weight_formats(formats)
    opt.formats = ctypes.pointer(f) if f is not None else None
    opt.shards, opt.num_layers = int(shards), int(num_layers)
    raised = []
    if progress is not None:
        def _progress(user, done, total):
            if not raised:
                try:
                    progress(done, total)
                except BaseException as e:  # it cannot cross the C frames: raised after
                    raised.append(e)
        opt.progress = T.PROGRESS_FN(_progress)
    _check(ctx, _lib.lib().mla_checkpoint_generate(_handle(ctx), os.fspath(path).encode(),
                                                   ctypes.byref(cfg), ctypes.byref(opt)))
    if raised:
        raise raised[0]
