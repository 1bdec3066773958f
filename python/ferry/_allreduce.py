"""ferry.AllReduce on PyTorch tensors."""

from __future__ import annotations

from typing import Optional

import torch

from . import _C
from ._checks import InvalidArgument, check_tensor, current_stream, ferry_dtype

# What AllReduce reduces (fp8 is for EP dispatch only).
ALLREDUCE_DTYPES = (torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16, torch.float16)
# Names -> the module's enums, resolved once (not per call).
_OPS = dict(_C.ReduceOp.__members__)
_ALGORITHMS = dict(_C.AllReduceAlgorithm.__members__)
ALLREDUCE_OPS = tuple(_OPS)
_WHERE = "AllReduce.allreduce"


def check_allreduce_args(max_bytes: int, device: torch.device, tensor, op: str,
                         out: Optional[torch.Tensor]) -> None:
    """The checks of AllReduce.allreduce, without a communicator (tests use it on CPU)."""
    if op not in ALLREDUCE_OPS:
        raise InvalidArgument(f"{_WHERE}: op must be one of {', '.join(ALLREDUCE_OPS)}, got {op!r}")
    check_tensor(_WHERE, "tensor", tensor, dtypes=ALLREDUCE_DTYPES, device=device)
    nbytes = tensor.numel() * tensor.element_size()
    if nbytes > max_bytes:
        raise InvalidArgument(f"{_WHERE}: tensor has {nbytes} bytes ({list(tensor.shape)} {tensor.dtype}), "
                              f"more than this AllReduce's max_bytes {max_bytes}")
    if out is not None:
        check_tensor(_WHERE, "out", out, dtypes=(tensor.dtype,), shape=list(tensor.shape), device=device)


class AllReduce:
    """Sum (or prod/min/max/avg) a tensor across the communicator's ranks: over NVLink
    inside a node; across nodes with the "hierarchical" algorithm (NVLink inside each
    node, the proxy between nodes), which "auto" picks there.

    `max_bytes`: the largest tensor any call reduces (inside a node the scratch is
    sized from it, about 2 * max_bytes of GPU memory; across nodes a window of at
    most ~64 MiB). Collective to create; create once, reuse.
    """

    def __init__(self, comm: "_C.Communicator", max_bytes: int, *, max_blocks: int = 0) -> None:
        if not isinstance(comm, _C.Communicator):
            raise TypeError(f"AllReduce: comm must be a ferry.Communicator (from ferry.init()), "
                            f"got {type(comm).__name__}")
        if int(max_bytes) <= 0:
            raise InvalidArgument(f"AllReduce: max_bytes must be > 0, got {max_bytes}")
        self.comm = comm
        self.device = torch.device("cuda", comm.device)
        self._impl = _C.AllReduce(comm, int(max_bytes), max_blocks)

    @property
    def max_bytes(self) -> int:
        return self._impl.max_bytes

    def algorithm(self, nbytes: int) -> str:
        """The algorithm chosen for a tensor of `nbytes` bytes."""
        return _C.algorithm_name(self._impl.select(int(nbytes)))

    @staticmethod
    def _algorithm(name: str) -> "_C.AllReduceAlgorithm":
        if name not in _ALGORITHMS:
            raise InvalidArgument(f"{_WHERE}: algorithm must be one of {', '.join(_ALGORITHMS)}, got {name!r}")
        return _ALGORITHMS[name]

    def allreduce(self, tensor: torch.Tensor, op: str = "sum", out: Optional[torch.Tensor] = None,
                  *, algorithm: str = "auto") -> torch.Tensor:
        """out = op over ranks of `tensor` (elementwise), on the current CUDA stream.

        `out=None` allocates the result; `out=tensor` reduces in place. Every rank
        gets bitwise identical results. Capturable in torch.cuda.graph.
        """
        check_allreduce_args(self._impl.max_bytes, self.device, tensor, op, out)
        if out is None:
            out = torch.empty_like(tensor)
        if tensor.numel() == 0:
            return out
        self._impl.run(tensor.data_ptr(), out.data_ptr(), tensor.numel(), ferry_dtype(tensor.dtype),
                       _OPS[op], current_stream(self.device), self._algorithm(algorithm))
        return out


__all__ = ["AllReduce", "ALLREDUCE_DTYPES", "ALLREDUCE_OPS", "check_allreduce_args"]
