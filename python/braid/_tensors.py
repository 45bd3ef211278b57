"""Tensors to (address, element count, braid dtype) and back, without torch headers.

Accepted: torch tensors, numpy arrays, and any DLPack producer (``__dlpack__``), which is
imported zero-copy through torch or numpy. Only host memory is reduced here: a device tensor
raises InvalidArgumentError (device memory goes through the NCCL backend, not this module).
"""

import ctypes

from . import _braid
from .errors import InvalidArgumentError

DT = _braid.DataType

_TORCH_DTYPES = None
_NUMPY_DTYPES = {
    "int8": DT.int8, "uint8": DT.uint8, "int32": DT.int32, "uint32": DT.uint32,
    "int64": DT.int64, "uint64": DT.uint64, "float16": DT.float16, "float32": DT.float32,
    "float64": DT.float64,
}


def _torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


def torch_dtypes():
    """torch dtype -> braid DataType (built on first use: torch stays an optional import)."""
    global _TORCH_DTYPES
    if _TORCH_DTYPES is None:
        torch = _torch()
        _TORCH_DTYPES = {} if torch is None else {
            torch.int8: DT.int8, torch.uint8: DT.uint8, torch.int32: DT.int32,
            torch.int64: DT.int64, torch.float16: DT.float16, torch.float32: DT.float32,
            torch.float64: DT.float64, torch.bfloat16: DT.bfloat16,
        }
    return _TORCH_DTYPES


def _is_torch(x):
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def as_host_array(x):
    """x itself when it is a torch tensor or numpy array; a zero-copy import of a DLPack
    producer otherwise."""
    if _is_torch(x):
        return x
    try:
        import numpy as np
        if isinstance(x, np.ndarray):
            return x
    except ImportError:
        np = None
    if hasattr(x, "__dlpack__"):
        torch = _torch()
        if torch is not None and hasattr(torch, "from_dlpack"):
            return torch.from_dlpack(x)
        if np is not None and hasattr(np, "from_dlpack"):
            return np.from_dlpack(x)
    raise InvalidArgumentError(
        f"braid needs a torch tensor, a numpy array or a DLPack producer, not {type(x).__name__}")


def buffer(x, what="tensor"):
    """(address, element count, DataType) of a contiguous host tensor/array."""
    if _is_torch(x):
        if x.device.type != "cpu":
            raise InvalidArgumentError(
                f"{what} is on {x.device}; this braid module reduces host memory only")
        if not x.is_contiguous():
            raise InvalidArgumentError(f"{what} is not contiguous; call .contiguous() first")
        dt = torch_dtypes().get(x.dtype)
        if dt is None:
            raise InvalidArgumentError(f"{what} has dtype {x.dtype}, which braid does not reduce")
        return x.data_ptr(), x.numel(), dt
    import numpy as np
    if isinstance(x, np.ndarray):
        if not x.flags["C_CONTIGUOUS"]:
            raise InvalidArgumentError(f"{what} is not C-contiguous")
        dt = _NUMPY_DTYPES.get(x.dtype.name)
        if dt is None:
            raise InvalidArgumentError(f"{what} has dtype {x.dtype}, which braid does not reduce")
        return x.ctypes.data, x.size, dt
    return buffer(as_host_array(x), what)


def torch_view(address, count, dtype, shape=None):
    """A torch tensor over memory braid owns (e.g. a Bucketer's gradient storage). The memory
    must outlive the tensor: the owner rebinds or drops such views before freeing it."""
    torch = _torch()
    if count == 0:
        t = torch.zeros(0, dtype=dtype)
    else:
        nbytes = count * torch.empty(0, dtype=dtype).element_size()
        raw = (ctypes.c_char * nbytes).from_address(address)
        t = torch.frombuffer(raw, dtype=dtype, count=count)
    return t.view(shape) if shape is not None else t
