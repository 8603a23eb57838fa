"""Shared fixtures. The package is imported from this source tree (python/);
libmla.so comes from LIBMLA_LIBRARY, else build/default of the checkout.
GPU tests skip unless the library has a working HIP device and torch sees
a CUDA/HIP GPU. LIBMLA_TEST_NO_TORCH=1 runs everything as if torch were
not installed (the NumPy-only run of .ci/run)."""

import os
import sys

import pytest

if os.environ.get("LIBMLA_TEST_NO_TORCH"):
    sys.modules["torch"] = None  # the NumPy-only run: torch cannot be imported

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

import libmla  # noqa: E402

np = pytest.importorskip("numpy")


def torch_or_none():
    try:
        import torch
        return torch
    except ImportError:
        return None


TORCH = torch_or_none()


def gpu_available():
    try:
        if libmla.gpu_count() < 1:
            return False
        libmla.Context("hip").close()
        return True
    except libmla.Error:
        return False


needs_torch = pytest.mark.skipif(TORCH is None, reason="torch is not installed")
needs_gpu = pytest.mark.skipif(not gpu_available(), reason="no GPU for the HIP backend")
needs_torch_gpu = pytest.mark.skipif(
    TORCH is None or not TORCH.cuda.is_available() or not gpu_available(),
    reason="needs torch with a CUDA/HIP GPU and the HIP backend")


@pytest.fixture
def cpu():
    with libmla.Context("cpu") as ctx:
        yield ctx


@pytest.fixture
def ref():
    with libmla.Context("reference") as ctx:
        yield ctx


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def bf16_bits(a):
    """float32 array -> bf16 bits (round to nearest even), through libmla."""
    return libmla.convert(np.ascontiguousarray(a, dtype=np.float32), dtype="bf16",
                          ctx=libmla.default_context())


def bf16_values(bits):
    """bf16 bits (uint16) -> float32 values, exactly."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


class DLPackOnly:
    """An object that offers its tensor through DLPack alone."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, **kw):
        return self.t.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()
