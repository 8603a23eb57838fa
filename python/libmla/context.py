"""Contexts, default contexts, device memory, and the per-call machinery
(descriptors, the framework's stream, errors)."""

import ctypes
import os
import threading
import weakref

from . import _lib
from . import _tensor as TS
from . import _types as T
from ._lib import Error

S = T.Status
_BACKENDS = {"auto": T.Backend.AUTO, "reference": T.Backend.REFERENCE, "ref": T.Backend.REFERENCE,
             "cpu": T.Backend.CPU, "hip": T.Backend.HIP, "gpu": T.Backend.HIP}

_live_contexts = weakref.WeakSet()


def _unload_all():
    for ctx in list(_live_contexts):
        ctx.close()
    _defaults.__dict__.clear()


_lib._unload_hooks.append(_unload_all)


def backend_of(b):
    if isinstance(b, T.Backend):
        return b
    if isinstance(b, int):
        return T.Backend(b)
    try:
        return _BACKENDS[str(b).lower()]
    except KeyError:
        raise Error(S.ERR_INVALID_ARGUMENT, "backend", "%r is not a backend (auto, reference, "
                    "cpu, hip)" % (b,)) from None


def _stream_handle(stream):
    """A raw stream pointer from None, an int, or a stream object
    (torch.cuda.Stream, cupy streams: .cuda_stream / .ptr)."""
    if stream is None:
        return None
    if isinstance(stream, int):
        return stream or None
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(stream, attr, None)
        if isinstance(v, int):
            return v or None
    raise Error(S.ERR_INVALID_ARGUMENT, "stream", "%r is not a stream (an int handle, or an "
                "object with .cuda_stream)" % (stream,))


class _Closable:
    """close() at the end of a with block and on collection."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Context(_Closable):
    """A libmla context: one backend, one device, one stream.

    Args:
        backend: "auto" (a working GPU, else the CPU), "cpu", "reference" or "hip".
        threads: CPU backend: OpenMP threads (0: the library's default).
        device: HIP backend: the GPU index.
        stream: HIP backend: the stream to run on (see ``stream``).

    A context is not thread-safe; use one per thread. ``close()`` (or the
    ``with`` block's end) destroys it together with the plans and weights
    made on it; using any of them afterwards raises libmla.Error.
    """

    def __init__(self, backend="auto", *, threads=0, device=0, stream=None):
        opt = T.ContextOptions(int(threads), int(device), _stream_handle(stream))
        h = ctypes.c_void_p()
        st = _lib.lib().mla_context_create(int(backend_of(backend)), ctypes.byref(opt),
                                           ctypes.byref(h))
        if st != 0:
            raise Error(st, "backend", "cannot create a %s context" % backend_of(backend).name)
        self._h = h.value
        self._gen = _lib.generation()
        self._children = weakref.WeakSet()
        self._device = int(device)
        # follow torch's current stream until a stream is set explicitly
        self.follow_torch_stream = stream is None
        _live_contexts.add(self)

    # -- lifetime
    @property
    def handle(self):
        """The mla_context pointer; raises once the context is closed."""
        if self._h is None or self._gen != _lib.generation():
            raise Error(S.ERR_INVALID_ARGUMENT, "ctx",
                        "the context was closed (or libmla unloaded)")
        return self._h

    @property
    def closed(self):
        return self._h is None or self._gen != _lib.generation()

    def _own(self, child):
        self._children.add(child)

    def close(self):
        """Destroys the plans and weights made on this context, then the context."""
        if self._h is None:
            return
        for c in list(self._children):
            c.close()
        if self._gen == _lib.generation():
            _lib.lib().mla_context_destroy(self._h)
        self._h = None
        _live_contexts.discard(self)

    def __repr__(self):
        if self.closed:
            return "<libmla.Context closed>"
        return "<libmla.Context %s: %s>" % (self.backend.name.lower(), self.device_name)

    # -- what it is
    @property
    def backend(self):
        return T.Backend(_lib.lib().mla_context_backend(self.handle))

    @property
    def memory(self):
        """libmla.Memory.HOST or DEVICE: where its tensors must live."""
        return T.Memory(_lib.lib().mla_context_memory(self.handle))

    @property
    def device(self):
        """The GPU index of a HIP context (0 for host contexts)."""
        return self._device if self.memory == T.Memory.DEVICE else 0

    @property
    def target(self):
        return T.Target(_lib.lib().mla_context_target(self.handle))

    @property
    def device_name(self):
        return _lib.cstr(_lib.lib().mla_context_device_name(self.handle))

    @property
    def fallback_reason(self):
        return _lib.cstr(_lib.lib().mla_context_fallback_reason(self.handle))

    # -- capture for replay (docs/REPLAY.md)
    def set_dump(self, ops, dir=None, max_calls=0):
        """Dumps each call of the named ops (``mla op`` names: a comma-separated
        string or a list; "*" for all) into a new folder under ``dir``
        (default "mla-dump"), at most ``max_calls`` of them (0: 8), each with
        the replay.sh that ``mla op --replay`` reruns. None or "" turns it off.
        Replaces what MLA_DUMP / MLA_DUMP_DIR / MLA_DUMP_MAX set at creation."""
        if ops is not None and not isinstance(ops, str):
            ops = ",".join(ops)
        self.check(_lib.lib().mla_context_set_dump(
            self.handle, ops.encode() if ops else None,
            os.fspath(dir).encode() if dir is not None else None, int(max_calls)))

    @property
    def dump_status(self):
        """What the dump switch did: "" when off; the ops and folder; the last
        folder written; or why nothing was."""
        return _lib.cstr(_lib.lib().mla_context_dump_status(self.handle))

    def check(self, status):
        """Raises libmla.Error for a failed status, with this context's record."""
        _lib.check(status, self._h)

    def synchronize(self):
        """Waits for the work queued on the context (no-op on host backends)."""
        self.check(_lib.lib().mla_context_synchronize(self.handle))

    # -- streams
    @property
    def stream(self):
        """The stream work is queued on (an int handle; None for the runtime's
        default stream and on host backends). Setting it (an int, or an object
        with ``.cuda_stream`` such as torch.cuda.Stream) orders the context's
        earlier work before its later work (mla_context_set_stream).

        Calls on torch GPU tensors set it to torch's current stream first,
        unless a stream was set explicitly (at creation or here), which clears
        ``follow_torch_stream``."""
        return _lib.lib().mla_context_get_stream(self.handle)

    @stream.setter
    def stream(self, s):
        self.check(_lib.lib().mla_context_set_stream(self.handle, _stream_handle(s)))
        self.follow_torch_stream = False

    def _follow_torch(self, device_index):
        import torch
        s = torch.cuda.current_stream(device_index).cuda_stream
        lib = _lib.lib()
        if lib.mla_context_get_stream(self._h) != (s or None):
            self.check(lib.mla_context_set_stream(self._h, s or None))

    # -- tuning (docs/TUNING.md)
    @property
    def tuning(self):
        """Every kernel-path knob and its value, {"cpu_isa": "auto", ...}
        (mla_context_get_tuning)."""
        lib = _lib.lib()
        t = T.Tuning()
        lib.mla_tuning_init(ctypes.byref(t))
        self.check(lib.mla_context_get_tuning(self.handle, ctypes.byref(t)))
        buf = ctypes.create_string_buffer(1024)
        lib.mla_tuning_format(ctypes.byref(t), 1, buf, len(buf))
        return dict(kv.split("=", 1) for kv in buf.value.decode().split())

    def set_tuning(self, **knobs):
        """Sets knobs by key, values as their environment variables spell them
        (``ctx.set_tuning(cpu_isa="avx2")``); the others keep their value."""
        lib = _lib.lib()
        t = T.Tuning()
        lib.mla_tuning_init(ctypes.byref(t))
        self.check(lib.mla_context_get_tuning(self.handle, ctypes.byref(t)))
        for key, value in knobs.items():
            st = lib.mla_tuning_set(ctypes.byref(t), key.encode(), str(value).encode())
            if st:
                raise Error(st, key, "%r is not a value of tuning knob %r" % (value, key))
        self.check(lib.mla_context_set_tuning(self.handle, ctypes.byref(t)))

    # -- capabilities and memory
    def supports(self, op, in_dtype=0, out_dtype=0, layout=0, rule=0, group=0, rows=0, cols=0):
        """None when the backend runs the variant, else the name of the
        parameter that rules it out (mla_supports)."""
        v = T.Variant(int(op), int(TS.dtype_of(in_dtype)), int(TS.dtype_of(out_dtype)),
                      int(layout), int(rule), group, rows, cols)
        why = ctypes.c_char_p()
        st = _lib.lib().mla_supports(self.handle, ctypes.byref(v), ctypes.byref(why))
        if st == 0:
            return None
        if st == S.ERR_UNSUPPORTED:
            return _lib.cstr(why.value)
        raise Error(st, _lib.cstr(why.value), "mla_supports refused the variant")

    def empty(self, shape, dtype, like=None):
        """An uninitialised tensor in this context's memory (see libmla.empty)."""
        return TS.empty(like, shape, TS.dtype_of(dtype), self)


class DeviceArray(_Closable):
    """Device memory from mla_malloc for GPU outputs when torch is absent;
    exposes ``__cuda_array_interface__`` (so CuPy and others take it without a
    copy) and ``numpy()`` (a copy to the host of a contiguous array). ``T`` is
    the transposed view of a 2-D array. Freed with its context."""

    def __init__(self, ctx, shape, dtype, _base=None, _strides=None):
        self.ctx, self.shape, self.dtype = ctx, tuple(shape), TS.dtype_of(dtype)
        self.itemsize = TS.dtype_size(self.dtype)
        self.strides = _strides  # elements; None: contiguous
        self._base = _base
        if _base is not None:
            self.ptr, self.nbytes = _base.ptr, _base.nbytes
            return
        n = self.itemsize
        for d in self.shape:
            n *= d
        self.nbytes = n
        p = ctypes.c_void_p()
        ctx.check(_lib.lib().mla_malloc(ctx.handle, max(n, 1), ctypes.byref(p)))
        self.ptr = p.value
        ctx._own(self)

    def _view(self, offset, shape, dtype):
        """A contiguous array of shape/dtype at byte ``offset`` of this one."""
        v = DeviceArray(self.ctx, shape, dtype, self._base or self)
        v.ptr = self.ptr + int(offset)
        v.nbytes = v.itemsize
        for d in v.shape:
            v.nbytes *= d
        if offset < 0 or offset + v.nbytes > self.nbytes:
            raise Error(S.ERR_OUT_OF_RANGE, "offset", "the view leaves the array")
        return v

    @property
    def T(self):
        if len(self.shape) != 2:
            raise Error(S.ERR_SHAPE, "T", "only a 2-D DeviceArray has a transpose")
        st = self.strides or (self.shape[1], 1)
        return DeviceArray(self.ctx, self.shape[::-1], self.dtype, self._base or self, st[::-1])

    @property
    def __cuda_array_interface__(self):
        typestr = {"uint16": "<u2", "uint8": "|u1", "float32": "<f4", "float16": "<f2",
                   "int32": "<i4", "int64": "<i8", "float64": "<f8"}[TS._numpy_storage(self.dtype)]
        strides = None if self.strides is None else tuple(s * self.itemsize for s in self.strides)
        return {"shape": self.shape, "typestr": typestr, "data": (self.ptr, False),
                "version": 3, "strides": strides, "stream": None}

    def numpy(self):
        if self.strides is not None:
            raise Error(S.ERR_STRIDE, "numpy", "copy the base array, not a strided view")
        import numpy as np
        out = np.empty(self.shape, dtype=TS._numpy_storage(self.dtype))
        self.ctx.check(_lib.lib().mla_memcpy(self.ctx.handle, out.ctypes.data, self.ptr,
                                             self.nbytes, int(T.CopyKind.CONTEXT_TO_HOST)))
        return out

    def close(self):
        if self._base is None and self.ptr is not None and not self.ctx.closed:
            _lib.lib().mla_free(self.ctx.handle, self.ptr)
        self.ptr = None


# ------------------------------------------------------------ defaults

_defaults = threading.local()


def default_context(device=None):
    """The calling thread's default context: the CPU backend for host tensors
    (device None), the HIP backend on GPU `device`. Made on first use;
    ``set_default_context`` replaces it."""
    key = "host" if device is None else "gpu%d" % device
    ctx = getattr(_defaults, key, None)
    if ctx is None or ctx.closed:
        ctx = Context("cpu") if device is None else Context("hip", device=device)
        setattr(_defaults, key, ctx)
    return ctx


def set_default_context(ctx):
    """Makes ctx the calling thread's default for its kind of memory."""
    key = "host" if ctx.memory == T.Memory.HOST else "gpu%d" % ctx.device
    setattr(_defaults, key, ctx)


class Call:
    """One C call's arguments: tensor descriptors (kept alive with their
    objects until the call returns) checked against the context."""

    def __init__(self, ctx, *objs):
        self.keep = []
        self.first = None
        if ctx is None:
            ctx = self._pick_context(objs)
        self.ctx = ctx
        self.h = ctx.handle
        self.memory = ctx.memory

    @staticmethod
    def _pick_context(objs):
        for o in objs:
            if o is None:
                continue
            d = TS.describe(o.obj if isinstance(o, TS.View) else o, "x")
            if d.device == "host":
                return default_context()
            dev = d.device[1]
            if dev < 0:
                raise Error(S.ERR_INVALID_ARGUMENT, "ctx", "device memory of an unknown GPU: "
                            "pass ctx=libmla.Context(\"hip\", device=...)")
            return default_context(dev)
        return default_context()

    def t(self, obj, name, hint=None, out=False):
        """A pointer to the mla_tensor of obj (None stays NULL)."""
        if obj is None:
            return None
        explicit = None
        if isinstance(obj, TS.View):
            obj, explicit = obj.obj, obj.dtype
        d = TS.describe(obj, name, self.ctx.stream if self.memory == T.Memory.DEVICE else None)
        dtype = TS.resolve_dtype(d, name, explicit, hint)
        if out and d.readonly:
            raise Error(S.ERR_INVALID_ARGUMENT, name, "%s is read-only" % name)
        if d.device == "host":
            if self.memory != T.Memory.HOST:
                raise Error(S.ERR_WRONG_DEVICE, name, "%s is in host memory; this %s context "
                            "takes GPU %d tensors" % (name, self.ctx.backend.name,
                                                     self.ctx.device))
            mem = T.Memory.HOST
        else:
            dev = d.device[1]
            if self.memory != T.Memory.DEVICE:
                raise Error(S.ERR_WRONG_DEVICE, name, "%s is on GPU %d; this %s context takes "
                            "host tensors" % (name, dev, self.ctx.backend.name))
            if dev >= 0 and dev != self.ctx.device:
                raise Error(S.ERR_WRONG_DEVICE, name, "%s is on GPU %d; the context's GPU is %d"
                            % (name, dev, self.ctx.device))
            if d.torch and self.ctx.follow_torch_stream:
                self.ctx._follow_torch(dev)
            mem = T.Memory.DEVICE
        tensor = T.Tensor()
        try:
            TS.fill(tensor, d, dtype, mem)
        except Error as e:
            raise Error(e.code, name, "%s: %s" % (name, e.detail)) from None
        self.keep.append((d.keep, tensor))
        if self.first is None:
            self.first = obj
        return ctypes.pointer(tensor)

    def out(self, obj, name, shape, dtype, hint=None):
        """obj as an output, or a new tensor of shape/dtype like the call's
        first input when obj is None. Returns (pointer, object)."""
        if obj is None:
            obj = TS.empty(self.first, shape, dtype, self.ctx)
            return self.t(TS.View(obj, dtype), name), obj
        return self.t(obj, name, hint=hint, out=True), (obj.obj if isinstance(obj, TS.View)
                                                         else obj)

    def check(self, status):
        self.ctx.check(status)


class Handle(_Closable):
    """A C object made on a context (plans, weights, files): freed by close(),
    by its context's close(), or when collected."""

    _free = None  # name of the C function that frees the handle

    def __init__(self, ctx, h):
        self.ctx = ctx
        self._h = h
        self._gen = _lib.generation()
        if ctx is not None:
            ctx._own(self)

    @property
    def handle(self):
        if self._h is None or self._gen != _lib.generation() or (
                self.ctx is not None and self.ctx.closed):
            raise Error(S.ERR_INVALID_ARGUMENT, type(self).__name__,
                        "this %s was closed (or its context was)" % type(self).__name__)
        return self._h

    def _release(self, h):
        getattr(_lib.lib(), self._free)(h)

    def close(self):
        h, self._h = self._h, None
        if h is not None and self._gen == _lib.generation():
            self._release(h)
