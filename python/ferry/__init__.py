"""ferry: MoE expert-parallel dispatch/combine and allreduce over NVLink, from PyTorch.

    import ferry
    comm = ferry.init()                       # from torch.distributed (torchrun) or MPI
    ar = ferry.AllReduce(comm, max_bytes=64 << 20)
    y = ar.allreduce(x)                        # on the current CUDA stream
    layer = ferry.EpLayer(None, max_tokens, hidden, topk, num_experts)
    output, weights, layout = layer.dispatch(x, exp_indices, weight)
    combined = layer.combine(expert_output, layout)

See docs/python.md.
"""

from . import _C
from ._C import (AbortedError, BootstrapError, CudaError, Error, InvalidArgument, MismatchError, NotSupported,
                 TimeoutError)
from ._allreduce import AllReduce
from ._comm import Communicator, init
from ._ep import EpLayer, EpLayout

__version__ = "0.1.0"

__all__ = [
    "init", "Communicator", "AllReduce", "EpLayer", "EpLayout",
    "Error", "InvalidArgument", "TimeoutError", "AbortedError", "MismatchError", "NotSupported",
    "BootstrapError", "CudaError", "__version__",
]
