"""Tensors over memory the library owns (dispatch results), without a libtorch link.

The compiled module returns raw device pointers; `device_tensor` wraps one with
the CUDA array interface, which torch imports without copying. The wrapper keeps
`owner` (the EpLayer's buffer) alive for as long as any tensor over it lives.
"""

from __future__ import annotations

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


def device_tensor(pointer: int, shape: Sequence[int], dtype: torch.dtype, device: torch.device,
                  owner) -> torch.Tensor:
    """A tensor of `dtype` and `shape` over `pointer` (device memory of `device`)."""
    typestr, carrier = _INTERFACE_TYPE[dtype]
    if any(int(s) == 0 for s in shape):
        return torch.empty(tuple(int(s) for s in shape), dtype=dtype, device=device)
    if pointer == 0:
        raise ValueError(f"device_tensor: null pointer for a {dtype} tensor of shape {list(shape)}")
    tensor = torch.as_tensor(_DeviceMemory(pointer, shape, typestr, owner), device=device)
    return tensor if carrier is None else tensor.view(dtype)
