"""Argument checks shared by the PyTorch layer, and the torch <-> ferry dtype map.

Every check names the call, the argument and what was expected. check_tensor
(AllReduce) checks in a fixed order: type, dtype, shape (rank, then sizes),
contiguity, device; so a CPU tensor with the right dtype and shape fails on its
device, and a test without a GPU can still check the others. EP leaves all but
the torch side (tensor_view: Python types, torch dtypes) to the compiled
module's checks (src/ep/ep_args.hpp), which run once per call.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

import torch

from . import _C

InvalidArgument = _C.InvalidArgument

# torch dtype -> ferry DataType (the one place where the two meet).
TORCH_TO_FERRY = {
    torch.float32: _C.DataType.float32,
    torch.float64: _C.DataType.float64,
    torch.int32: _C.DataType.int32,
    torch.int64: _C.DataType.int64,
    torch.bfloat16: _C.DataType.bfloat16,
    torch.float16: _C.DataType.float16,
    torch.float8_e4m3fn: _C.DataType.float8_e4m3,
}


def ferry_dtype(dtype: torch.dtype) -> "_C.DataType":
    return TORCH_TO_FERRY[dtype]


def _names(dtypes: Iterable[torch.dtype]) -> str:
    names = [str(d) for d in dtypes]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _shape_text(shape: Sequence[Optional[int]]) -> str:
    return "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"


def check_tensor(where: str, name: str, tensor, *, dtypes: Sequence[torch.dtype],
                 shape: Optional[Sequence[Optional[int]]] = None,
                 device: Optional[torch.device] = None) -> torch.Tensor:
    """Checks one tensor argument; returns it. `shape` entries None match any size."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{where}: {name} must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dtype not in dtypes:
        raise InvalidArgument(f"{where}: {name} must be {_names(dtypes)}, got {tensor.dtype}")
    if shape is not None:
        if tensor.dim() != len(shape):
            raise InvalidArgument(
                f"{where}: {name} must have {len(shape)} dimensions {_shape_text(shape)}, "
                f"got shape {list(tensor.shape)}")
        for axis, (got, want) in enumerate(zip(tensor.shape, shape)):
            if want is not None and got != want:
                raise InvalidArgument(
                    f"{where}: {name} must have shape {_shape_text(shape)}, got {list(tensor.shape)} "
                    f"(dimension {axis} is {got}, expected {want})")
    if not tensor.is_contiguous():
        raise InvalidArgument(
            f"{where}: {name} must be contiguous, got strides {list(tensor.stride())} for shape "
            f"{list(tensor.shape)} (call .contiguous())")
    if device is not None:
        if tensor.device.type != "cuda":
            raise InvalidArgument(f"{where}: {name} must be a CUDA tensor on {device}, got a tensor on "
                                  f"{tensor.device}")
        if tensor.device.index != device.index:
            raise InvalidArgument(f"{where}: {name} must be on {device} (the communicator's GPU), got "
                                  f"{tensor.device}")
    return tensor


def tensor_view(tensor: Optional[torch.Tensor], where: str = "", name: str = "tensor", *,
                required: bool = False) -> "_C.TensorView":
    """The compiled module's view of `tensor` (empty for None unless `required`).
    What the module cannot see is checked here: a non-tensor is a TypeError, a
    torch dtype ferry has no counterpart for an InvalidArgument."""
    if tensor is None and not required:
        return _C.TensorView()
    prefix = f"{where}: " if where else ""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{prefix}{name} must be a torch.Tensor, got {type(tensor).__name__}")
    dtype = TORCH_TO_FERRY.get(tensor.dtype)
    if dtype is None:
        raise InvalidArgument(f"{prefix}{name} has dtype {tensor.dtype}, which ferry does not take "
                              f"(it takes {_names(TORCH_TO_FERRY)})")
    return _C.TensorView(tensor.data_ptr(), dtype, list(tensor.shape), list(tensor.stride()))


def current_stream(device: torch.device) -> int:
    """The caller's current CUDA stream on `device`, as the integer the module takes."""
    return torch.cuda.current_stream(device).cuda_stream
