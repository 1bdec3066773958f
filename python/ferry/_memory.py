"""Tensors over memory the library owns (dispatch results), without a libtorch link.

The compiled module returns raw device pointers; `device_tensor` wraps one with
the CUDA array interface, which torch imports without copying. The wrapper keeps
`owner` (the EpLayer's buffer) alive for as long as any tensor over it lives.

NOTE [no views over library memory]: every tensor this package hands out over
its own memory is `standalone`: a tensor of its own over the storage, never a
torch view (`._base`) of another tensor. torch keeps a view's base alive from
C++; once the base's Python object is gone (the layer's cache dropped at
finalize, the carrier tensor of a bf16/fp8 region right away), torch keeps that
object alive from the C++ side too, and releases it only while the interpreter
is initialized. A view still alive at interpreter exit (a module global, a
reference cycle the collector reaches only at shutdown) therefore never frees
its base: the storage, this module's wrapper, the EpBuffer and its Communicator
all outlive the interpreter, and nanobind reports them as leaked at exit. A
standalone tensor holds only the storage and is freed at exit like any other.
Views the caller makes of these tensors are torch's own business (the same holds
for them); `_collect_at_exit` below covers those that only cycles keep.
"""

from __future__ import annotations

import atexit
import gc
from typing import Sequence

import torch

# dtypes the CUDA array interface can name; the others travel as a same-size
# integer type and are viewed back.
_INTERFACE_TYPE = {
    torch.float32: ("<f4", None),
    torch.int32: ("<i4", None),
    torch.int64: ("<i8", None),
    torch.bfloat16: ("<i2", torch.int16),
    torch.float8_e4m3fn: ("|u1", torch.uint8),
}


class _DeviceMemory:
    __slots__ = ("__cuda_array_interface__", "_owner")

    def __init__(self, pointer: int, shape: Sequence[int], typestr: str, owner) -> None:
        self._owner = owner
        self.__cuda_array_interface__ = {
            "shape": tuple(int(s) for s in shape),
            "typestr": typestr,
            "data": (int(pointer), False),
            "version": 3,
            "strides": None,
            # No stream: the caller orders its reads after the dispatch on its stream.
            "stream": None,
        }


def standalone(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor` (a view: a slice, a reshape, a dtype view) as a tensor of its own:
    the same storage, offset, shape and strides, no link to the tensor it was cut
    from. NOTE [no views over library memory]. Metadata only (graph-capture safe)."""
    return tensor.detach()


def device_tensor(pointer: int, shape: Sequence[int], dtype: torch.dtype, device: torch.device,
                  owner) -> torch.Tensor:
    """A tensor of `dtype` and `shape` over `pointer` (device memory of `device`);
    never a view (NOTE [no views over library memory])."""
    typestr, carrier = _INTERFACE_TYPE[dtype]
    if any(int(s) == 0 for s in shape):
        return torch.empty(tuple(int(s) for s in shape), dtype=dtype, device=device)
    if pointer == 0:
        raise ValueError(f"device_tensor: null pointer for a {dtype} tensor of shape {list(shape)}")
    tensor = torch.as_tensor(_DeviceMemory(pointer, shape, typestr, owner), device=device)
    return tensor if carrier is None else standalone(tensor.view(dtype))


def _collect_at_exit() -> None:
    """Collects reference cycles while torch can still release what they hold.
    Python's own last collection runs after Py_IsInitialized() turned false, when
    torch no longer releases the base of a view (NOTE [no views over library
    memory]), so a cycle holding a view over a layer's memory would keep the layer's
    buffer and communicator past exit. Registered at import: it runs before the
    exit handlers of the modules imported earlier (torch's among them)."""
    gc.collect()


atexit.register(_collect_at_exit)
