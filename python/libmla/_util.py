"""Small helpers shared by the op modules."""

from . import _tensor as TS
from . import _types as T
from ._lib import Error


def enum(cls, v, name):
    """An enum member from a member, its value, or its name (any case)."""
    if isinstance(v, cls):
        return v
    if isinstance(v, int):
        return cls(v)
    try:
        return cls[str(v).upper()]
    except KeyError:
        raise Error(T.Status.ERR_INVALID_ARGUMENT, name, "%r is not one of %s"
                    % (v, ", ".join(m.name.lower() for m in cls))) from None


def shape(p):
    """The shape of the mla_tensor behind pointer p."""
    t = p.contents
    return tuple(t.shape[i] for i in range(t.ndim))


def dtype(p):
    return T.DType(p.contents.dtype)


def need(cond, code, param, detail):
    if not cond:
        raise Error(code, param, detail)


def rank(p, n, name):
    s = shape(p)
    need(len(s) == n, T.Status.ERR_SHAPE, name, "%s must be %d-D, got shape %s" % (name, n, s))
    return s


def transposed(c, obj, name, shape2, dt):
    """An output [a, b] that is the transpose of a contiguous [b, a] buffer
    (scales with stride (1, a)); obj when the caller passed one."""
    if obj is not None:
        return c.out(obj, name, shape2, dt, hint=dt)
    buf = TS.empty(c.first, (shape2[1], shape2[0]), dt, c.ctx)
    v = buf.t() if hasattr(buf, "t") and callable(buf.t) else buf.T
    return c.t(v, name, hint=dt), v


def fp8_dtype(fp8):
    d = TS.dtype_of(fp8)
    need(d in (T.DType.FP8_E4M3FN, T.DType.FP8_E4M3FNUZ), T.Status.ERR_DTYPE, "fp8",
         "fp8 is fp8_e4m3fn or fp8_e4m3fnuz, not %s" % d.name)
    return d
