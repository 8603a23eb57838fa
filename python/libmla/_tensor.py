"""Zero-copy tensor descriptors for the C calls.

Accepted objects, in this order: ``libmla.view`` wrappers (an explicit dtype
over another object), PyTorch tensors, NumPy arrays, objects with
``__cuda_array_interface__``, objects with ``__dlpack__``, objects with
``__array_interface__``. The descriptor points at the object's own memory
with its own strides; nothing is ever copied. An object that cannot be
described as it is (negative strides, a byte stride that is not a multiple
of the element size, a lazily conjugated or negated torch view, a sparse
layout) is refused, as is a dtype libmla has no name for.

dtypes: float32/float16/float64/int32/int64/uint8 map to themselves,
torch.bfloat16 and torch.float8_e4m3fn(uz) (and ml_dtypes' NumPy types of
the same names) to BF16 / FP8_*. NumPy has no bf16 or fp8 of its own: a
uint16 array is bf16 or f16 only through ``libmla.view(a, "bf16")``, a
uint8 array is fp8 / e8m0 / fp4x2 codes through ``libmla.view`` or where
the parameter can hold nothing else (MXFP4 codes and scales, or fp8 codes
whose flavour the call names).
"""

import ctypes
import sys

from . import _types as T
from ._lib import Error

S = T.Status

_DTYPE_NAMES = {
    "f32": T.DType.F32, "float32": T.DType.F32, "float": T.DType.F32,
    "f16": T.DType.F16, "float16": T.DType.F16, "half": T.DType.F16,
    "bf16": T.DType.BF16, "bfloat16": T.DType.BF16,
    "fp8_e4m3fn": T.DType.FP8_E4M3FN, "e4m3fn": T.DType.FP8_E4M3FN,
    "float8_e4m3fn": T.DType.FP8_E4M3FN,
    "fp8_e4m3fnuz": T.DType.FP8_E4M3FNUZ, "e4m3fnuz": T.DType.FP8_E4M3FNUZ,
    "float8_e4m3fnuz": T.DType.FP8_E4M3FNUZ,
    "e8m0": T.DType.E8M0, "float8_e8m0fnu": T.DType.E8M0,
    "fp4x2": T.DType.FP4X2, "float4_e2m1fn_x2": T.DType.FP4X2,
    "u8": T.DType.U8, "uint8": T.DType.U8,
    "i32": T.DType.I32, "int32": T.DType.I32,
    "i64": T.DType.I64, "int64": T.DType.I64,
    "f64": T.DType.F64, "float64": T.DType.F64, "double": T.DType.F64,
}

_SIZE = {T.DType.F32: 4, T.DType.F16: 2, T.DType.BF16: 2, T.DType.FP8_E4M3FN: 1,
         T.DType.FP8_E4M3FNUZ: 1, T.DType.E8M0: 1, T.DType.FP4X2: 1, T.DType.U8: 1,
         T.DType.I32: 4, T.DType.I64: 8, T.DType.F64: 8}

# Native element kinds ("raw8"/"raw16": bytes that carry no number format of
# their own) and what each is without an explicit dtype.
_NATIVE = {"f32": T.DType.F32, "f16": T.DType.F16, "f64": T.DType.F64,
           "bf16": T.DType.BF16, "fp8_e4m3fn": T.DType.FP8_E4M3FN,
           "fp8_e4m3fnuz": T.DType.FP8_E4M3FNUZ, "e8m0": T.DType.E8M0,
           "fp4x2": T.DType.FP4X2, "i32": T.DType.I32, "i64": T.DType.I64,
           "raw8": T.DType.U8, "raw16": None}


def dtype_of(d):
    """A libmla.DType from a DType, its value, or a name ("bf16", "fp8_e4m3fn", ...)."""
    if isinstance(d, T.DType):
        return d
    if isinstance(d, int):
        return T.DType(d)
    if isinstance(d, str) and d.lower() in _DTYPE_NAMES:
        return _DTYPE_NAMES[d.lower()]
    name = getattr(d, "name", None) or str(d).replace("torch.", "")
    if name in _DTYPE_NAMES:
        return _DTYPE_NAMES[name]
    raise Error(S.ERR_DTYPE, "dtype", "%r is not a libmla dtype (names: %s)"
                % (d, ", ".join(sorted(set(k for k in _DTYPE_NAMES if len(k) <= 12)))))


def dtype_size(d):
    return _SIZE[dtype_of(d)]


class View:
    """An object seen with an explicit libmla dtype: ``view(a, "bf16")`` makes a
    NumPy uint16 array a bf16 tensor, ``view(codes, "fp8_e4m3fnuz")`` a uint8
    array fp8 codes. The element size must match; no data moves."""

    __slots__ = ("obj", "dtype")

    def __init__(self, obj, dtype):
        self.obj = obj.obj if isinstance(obj, View) else obj
        self.dtype = dtype_of(dtype)

    def __repr__(self):
        return "libmla.view(%r, %s)" % (self.obj, self.dtype.name)


def view(obj, dtype):
    """``obj`` with the explicit libmla dtype ``dtype`` (see View)."""
    return View(obj, dtype)


def bf16(obj):
    """``obj`` (e.g. a NumPy uint16 array) read as bf16."""
    return View(obj, T.DType.BF16)


# ---------------------------------------------------------------- sources

class Desc:
    """What a source object is: pointer, shape, strides (elements), kind,
    device ("host" or ("gpu", index)), writability."""

    __slots__ = ("ptr", "shape", "strides", "kind", "itemsize", "device", "readonly", "keep",
                 "torch")

    def __init__(self, ptr, shape, strides, kind, itemsize, device, readonly, keep, is_torch):
        self.ptr, self.shape, self.strides = ptr, tuple(shape), tuple(strides)
        self.kind, self.itemsize, self.device = kind, itemsize, device
        self.readonly, self.keep, self.torch = readonly, keep, is_torch


def _torch():
    return sys.modules.get("torch")


def _np():
    return sys.modules.get("numpy")


_TORCH_KIND = {
    "float32": "f32", "float16": "f16", "float64": "f64", "bfloat16": "bf16",
    "int32": "i32", "int64": "i64", "uint8": "raw8", "int8": "raw8",
    "int16": "raw16", "uint16": "raw16",
    "float8_e4m3fn": "fp8_e4m3fn", "float8_e4m3fnuz": "fp8_e4m3fnuz",
    "float8_e8m0fnu": "e8m0", "float4_e2m1fn_x2": "fp4x2",
}

_NP_KIND = {
    "float32": "f32", "float16": "f16", "float64": "f64", "int32": "i32", "int64": "i64",
    "uint8": "raw8", "int8": "raw8", "uint16": "raw16", "int16": "raw16",
    "bfloat16": "bf16", "float8_e4m3fn": "fp8_e4m3fn", "float8_e4m3fnuz": "fp8_e4m3fnuz",
    "float8_e8m0fnu": "e8m0",
}

_TYPESTR_KIND = {"f4": "f32", "f2": "f16", "f8": "f64", "i4": "i32", "i8": "i64",
                 "u1": "raw8", "i1": "raw8", "u2": "raw16", "i2": "raw16"}


def _bad(name, code, detail):
    return Error(code, name, detail)


def _from_torch(t, name):
    torch = _torch()
    if t.layout != torch.strided:
        raise _bad(name, S.ERR_STRIDE, "%s: a %s torch tensor has no strides to pass (only "
                   "torch.strided tensors)" % (name, t.layout))
    if t.is_conj() or (hasattr(t, "is_neg") and t.is_neg()):
        raise _bad(name, S.ERR_INVALID_ARGUMENT, "%s: a lazily conjugated or negated view; "
                   "call .resolve_conj()/.resolve_neg() first (that is a copy)" % name)
    kind = _TORCH_KIND.get(str(t.dtype).replace("torch.", ""))
    if kind is None:
        raise _bad(name, S.ERR_DTYPE, "%s: torch dtype %s has no libmla dtype" % (name, t.dtype))
    dev = t.device
    if dev.type == "cpu":
        device = "host"
    elif dev.type == "cuda":
        device = ("gpu", dev.index if dev.index is not None else torch.cuda.current_device())
    else:
        raise _bad(name, S.ERR_WRONG_DEVICE, "%s is on %s; libmla takes CPU and CUDA/HIP "
                   "tensors" % (name, dev))
    return Desc(t.data_ptr(), t.shape, t.stride(), kind, t.element_size(), device, False, t, True)


def _byte_strides(name, shape, strides, itemsize):
    if strides is None:
        out, acc = [], 1
        for n in reversed(shape):
            out.append(acc)
            acc *= max(int(n), 1)
        return tuple(reversed(out))
    out = []
    for s in strides:
        s = int(s)
        if s < 0:
            raise _bad(name, S.ERR_STRIDE, "%s: negative strides are not supported (libmla "
                       "strides are >= 0)" % name)
        if s % itemsize:
            raise _bad(name, S.ERR_STRIDE, "%s: a byte stride of %d is not a multiple of the "
                       "element size %d" % (name, s, itemsize))
        out.append(s // itemsize)
    return tuple(out)


def _from_numpy(a, name):
    kind = _NP_KIND.get(a.dtype.name)
    if kind is None or not a.dtype.isnative:
        raise _bad(name, S.ERR_DTYPE, "%s: NumPy dtype %s has no libmla dtype" % (name, a.dtype))
    strides = _byte_strides(name, a.shape, a.strides, a.itemsize)
    return Desc(a.ctypes.data, a.shape, strides, kind, a.itemsize, "host",
                not a.flags.writeable, a, False)


def _from_interface(obj, name, iface, device):
    if iface.get("mask") is not None:
        raise _bad(name, S.ERR_INVALID_ARGUMENT, "%s: masked arrays are not supported" % name)
    typestr = iface["typestr"]
    kind = _TYPESTR_KIND.get(typestr[1:])
    if kind is None or typestr[0] == ">":
        raise _bad(name, S.ERR_DTYPE, "%s: element type %r has no libmla dtype" % (name, typestr))
    itemsize = int(typestr[2:])
    shape = tuple(int(n) for n in iface["shape"])
    ptr, readonly = iface["data"]
    strides = _byte_strides(name, shape, iface.get("strides"), itemsize)
    return Desc(ptr or 0, shape, strides, kind, itemsize, device, bool(readonly), obj, False)


# DLPack (https://dmlc.github.io/dlpack/latest/): the structs and codes used here.
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManaged(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class _DLManagedVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_ROCM, _DL_ROCM_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 10, 11, 13
_DL_READ_ONLY = 1
_DL_KIND = {(0, 32): "i32", (0, 64): "i64", (0, 8): "raw8", (0, 16): "raw16",
            (1, 8): "raw8", (1, 16): "raw16", (2, 32): "f32", (2, 16): "f16", (2, 64): "f64",
            (4, 16): "bf16", (10, 8): "fp8_e4m3fn", (11, 8): "fp8_e4m3fnuz", (14, 8): "e8m0"}

_capsule_get = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get.restype = ctypes.c_void_p
_capsule_get.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.restype = ctypes.c_int
_capsule_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _from_dlpack(obj, name, stream):
    dev_type, dev_id = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else (1, 0)
    kwargs = {}
    if dev_type == _DL_CUDA:
        # the producer orders its work before the consumer's stream (1: CUDA's legacy default)
        kwargs["stream"] = stream if stream else 1
    elif dev_type == _DL_ROCM:
        kwargs["stream"] = stream if stream else 0  # 0: HIP's default stream
    try:
        cap = obj.__dlpack__(max_version=(1, 0), **kwargs)
    except TypeError:
        cap = obj.__dlpack__(**kwargs)
    flags = 0
    if _capsule_valid(cap, b"dltensor_versioned"):
        m = _DLManagedVersioned.from_address(_capsule_get(cap, b"dltensor_versioned"))
        dl, flags = m.dl_tensor, m.flags
    elif _capsule_valid(cap, b"dltensor"):
        dl = _DLManaged.from_address(_capsule_get(cap, b"dltensor")).dl_tensor
    else:
        raise _bad(name, S.ERR_INVALID_ARGUMENT, "%s: __dlpack__ returned no DLPack capsule"
                   % name)
    dt = dl.device.device_type
    if dt in (_DL_CPU, _DL_CUDA_HOST, _DL_ROCM_HOST):
        device = "host"
    elif dt in (_DL_CUDA, _DL_ROCM, _DL_CUDA_MANAGED):
        device = ("gpu", dl.device.device_id)
    else:
        raise _bad(name, S.ERR_WRONG_DEVICE, "%s: DLPack device type %d is neither host nor "
                   "a CUDA/HIP GPU" % (name, dt))
    if dl.dtype.lanes != 1:
        raise _bad(name, S.ERR_DTYPE, "%s: vector dtypes (lanes %d) are not supported"
                   % (name, dl.dtype.lanes))
    kind = _DL_KIND.get((dl.dtype.code, dl.dtype.bits))
    if kind is None:
        raise _bad(name, S.ERR_DTYPE, "%s: DLPack dtype (code %d, %d bits) has no libmla dtype"
                   % (name, dl.dtype.code, dl.dtype.bits))
    itemsize = dl.dtype.bits // 8
    shape = tuple(dl.shape[i] for i in range(dl.ndim))
    if dl.strides:
        strides = tuple(dl.strides[i] for i in range(dl.ndim))
        if any(s < 0 for s in strides):
            raise _bad(name, S.ERR_STRIDE, "%s: negative strides are not supported" % name)
    else:
        strides = _byte_strides(name, shape, None, 1)
    ptr = (dl.data or 0) + dl.byte_offset
    return Desc(ptr, shape, strides, kind, itemsize, device, bool(flags & _DL_READ_ONLY),
                (obj, cap), False)


def describe(obj, name, stream=None):
    """The Desc of a tensor-like object (see the module docstring)."""
    torch = _torch()
    if torch is not None and isinstance(obj, torch.Tensor):
        return _from_torch(obj, name)
    np = _np()
    if np is not None and isinstance(obj, np.ndarray):
        return _from_numpy(obj, name)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_interface(obj, name, cai, ("gpu", -1))
    if hasattr(obj, "__dlpack__"):
        return _from_dlpack(obj, name, stream)
    ai = getattr(obj, "__array_interface__", None)
    if ai is not None:
        return _from_interface(obj, name, ai, "host")
    raise _bad(name, S.ERR_INVALID_ARGUMENT, "%s: a %s is not a tensor (no __dlpack__, "
               "__cuda_array_interface__ or __array_interface__)" % (name, type(obj).__name__))


def resolve_dtype(d, name, explicit=None, hint=None):
    """The libmla dtype of a Desc: explicit (libmla.view) > native > hint for raw bytes."""
    native = _NATIVE[d.kind]
    if explicit is not None:
        if _SIZE[explicit] != d.itemsize:
            raise _bad(name, S.ERR_DTYPE, "%s: a %d-byte element cannot be viewed as %s (%d "
                       "bytes)" % (name, d.itemsize, explicit.name, _SIZE[explicit]))
        if d.kind not in ("raw8", "raw16") and native != explicit:
            raise _bad(name, S.ERR_DTYPE, "%s: %s data cannot be viewed as %s" % (
                name, native.name, explicit.name))
        return explicit
    if d.kind == "raw8" and hint is not None and _SIZE[hint] == 1:
        return hint
    if native is None:
        raise _bad(name, S.ERR_DTYPE, "%s: 16-bit integers are bf16 or f16 only through an "
                   "explicit dtype: libmla.view(x, \"bf16\") or libmla.view(x, \"f16\")" % name)
    return native


def fill(t, d, dtype, memory):
    """Writes the mla_tensor for Desc d into t."""
    if len(d.shape) > T.MAX_DIMS:
        raise Error(S.ERR_SHAPE, "", "%d dimensions; libmla takes at most %d"
                    % (len(d.shape), T.MAX_DIMS))
    t.data = d.ptr or None
    t.dtype = int(dtype)
    t.memory = int(memory)
    t.ndim = len(d.shape)
    for i, (n, s) in enumerate(zip(d.shape, d.strides)):
        t.shape[i] = int(n)
        t.stride[i] = int(s)


# ---------------------------------------------------------- allocation

def _torch_storage(dtype):
    torch = _torch()
    fp8 = {T.DType.FP8_E4M3FN: "float8_e4m3fn", T.DType.FP8_E4M3FNUZ: "float8_e4m3fnuz"}
    if dtype in fp8 and hasattr(torch, fp8[dtype]):
        return getattr(torch, fp8[dtype])
    return {T.DType.F32: torch.float32, T.DType.F16: torch.float16,
            T.DType.BF16: torch.bfloat16, T.DType.I32: torch.int32, T.DType.I64: torch.int64,
            T.DType.F64: torch.float64}.get(dtype, torch.uint8)


def _numpy_storage(dtype):
    return {T.DType.F32: "float32", T.DType.F16: "float16", T.DType.BF16: "uint16",
            T.DType.I32: "int32", T.DType.I64: "int64", T.DType.F64: "float64"}.get(dtype, "uint8")


def empty(like, shape, dtype, ctx):
    """A new output of the kind of ``like`` (a torch tensor on its device, or a
    NumPy array): bf16 is torch.bfloat16 or a NumPy uint16 array, fp8 a
    torch.float8_* tensor where torch has it (else uint8), e8m0 and fp4x2
    uint8. Without a usable ``like``: NumPy for host contexts, torch (or a
    libmla.DeviceArray without torch) for GPU ones."""
    shape = tuple(int(n) for n in shape)
    torch = _torch()
    if like is not None and torch is not None and isinstance(like, torch.Tensor):
        return torch.empty(shape, dtype=_torch_storage(dtype), device=like.device)
    if ctx.memory == T.Memory.HOST:
        import numpy as np
        return np.empty(shape, dtype=_numpy_storage(dtype))
    if torch is not None and torch.cuda.is_available():
        return torch.empty(shape, dtype=_torch_storage(dtype), device="cuda:%d" % ctx.device)
    from .context import DeviceArray
    return DeviceArray(ctx, shape, dtype)


def empty_workspace(like, nbytes, ctx, align=256):
    """A U8 scratch buffer of nbytes like ``like``, its start aligned to
    ``align`` bytes (the workspaces of the C calls must be): a slice of a
    slightly larger allocation."""
    nbytes = max(int(nbytes), 1)
    buf = empty(like, (nbytes + align,), T.DType.U8, ctx)
    if not hasattr(buf, "__getitem__"):
        return buf  # a DeviceArray: mla_malloc memory is 256-byte aligned
    ptr = describe(buf, "workspace").ptr
    off = (-ptr) % align
    return buf[off:off + nbytes]
