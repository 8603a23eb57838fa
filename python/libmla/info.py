"""Version, build options and devices (what ``mla info`` prints)."""

import ctypes

from . import _lib
from . import _types as T


def version():
    """The library's version string, e.g. "0.1.0"."""
    return _lib.cstr(_lib.lib().mla_version_string())


def version_info():
    a, b, c = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    _lib.lib().mla_version(ctypes.byref(a), ctypes.byref(b), ctypes.byref(c))
    return a.value, b.value, c.value


def build_info():
    """A dict of mla_build_info_get(): version, compiler, has_openmp, ..."""
    bi = _lib.lib().mla_build_info_get().contents
    out = {}
    for name, _ in bi._fields_:
        v = getattr(bi, name)
        out[name] = v.decode() if isinstance(v, bytes) else (bool(v) if name.startswith("has_")
                                                              else (v or ""))
    return out


def gpu_count():
    return _lib.lib().mla_gpu_count()


def gpu_name(device):
    buf = ctypes.create_string_buffer(256)
    _lib.check(_lib.lib().mla_gpu_name(int(device), buf, len(buf)))
    return buf.value.decode()


def info():
    """The report of ``mla info``, as a string."""
    lib = _lib.lib()
    bi = build_info()
    yn = lambda v: "yes" if v else "no"  # noqa: E731
    none = lambda s: s if s else "(none)"  # noqa: E731
    lines = ["libmla %s" % version(), "", "build",
             "  compiler        : %s" % none(bi["compiler"]),
             "  OpenMP          : %s" % yn(bi["has_openmp"]),
             "  OpenBLAS        : %s" % yn(bi["has_openblas"]),
             "  SLEEF           : %s" % yn(bi["has_sleef"]),
             "  CPU kernels     : %s" % none(bi["cpu_isa"]),
             "  HIP backend     : %s" % ("compiled" if bi["has_hip"] else "not compiled")]
    if bi["has_hip"]:
        lines += ["  HIP platform    : %s" % none(bi["hip_platform"]),
                  "  GPU targets     : %s" % none(bi["gpu_targets"])]
    lines += ["", "backends"]
    for b in range(T.Backend.REFERENCE, len(T.Backend)):
        lines.append("  %-15s : %s" % (_lib.cstr(lib.mla_backend_name(b)),
                                       "compiled" if lib.mla_backend_compiled(b)
                                       else "not compiled"))
    n = gpu_count()
    lines += ["", "GPUs seen         : %d" % n]
    for i in range(n):
        buf = ctypes.create_string_buffer(256)
        st = lib.mla_gpu_name(i, buf, len(buf))
        lines.append("  %d: %s" % (i, buf.value.decode() if st == 0 else _lib.status_name(st)))
    h = ctypes.c_void_p()
    st = lib.mla_context_create(int(T.Backend.AUTO), None, ctypes.byref(h))
    if st != 0:
        lines += ["", "auto              : cannot create a context (%s)" % _lib.status_name(st)]
        return "\n".join(lines) + "\n"
    lines += ["", "auto picks        : %s (%s)" % (
        _lib.cstr(lib.mla_backend_name(lib.mla_context_backend(h))),
        _lib.cstr(lib.mla_context_device_name(h)))]
    why = _lib.cstr(lib.mla_context_fallback_reason(h))
    if why:
        lines.append("fallback reason   : %s" % why)
    t = T.Tuning()
    lib.mla_tuning_init(ctypes.byref(t))
    lib.mla_context_get_tuning(h, ctypes.byref(t))
    buf = ctypes.create_string_buffer(1024)
    lib.mla_tuning_format(ctypes.byref(t), 1, buf, len(buf))
    lines += ["", "tuning (docs/TUNING.md)"]
    lines += ["  %-18s : %s" % tuple(kv.split("=", 1)) for kv in buf.value.decode().split()]
    lib.mla_context_destroy(h)
    return "\n".join(lines) + "\n"
