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



def _load_ucx():
    """The libucx-cu13 wheel's UCX, loaded before the module the way ucx-py and ucxx
    do (libucx.load_library(): dlopen by path, RTLD_LOCAL), so that libferry's
    libucp.so.0 resolves to it and not to an older libucp elsewhere on the system
    (ferry.ucx_versions() says which one was loaded). Without the wheel: the
    library's own RUNPATH, then the system's."""
    try:
        import libucx
    except ImportError:
        return
    libucx.load_library()


_load_ucx()

from . import _C  # noqa: E402 - after the UCX libraries
from ._C import (AbortedError, BootstrapError, CudaError, Error, InvalidArgument, MismatchError, NotSupported,
                 TimeoutError)
from ._allreduce import AllReduce
from ._comm import Communicator, init
from ._ep import EpDispatchHandle, EpLayer, EpLayout, EpRouting  # noqa: E402


def ucx_versions() -> "_C.UcxVersions":
    """The UCX ferry was built with (built_major, built_minor) and the one loaded
    (loaded_major, loaded_minor, loaded_release, loaded_library); loaded_older()
    is True when the loaded one is older, which the inter-node transport refuses."""
    return _C.ucx_versions()


def nccl_shim_path():
    """Path of libferry_nccl.so, NCCL's API with ncclAllReduce on ferry (docs/nccl-shim.md),
    for LD_PRELOAD; None when this build has none."""
    import os
    path = os.path.join(os.path.dirname(__file__), "libferry_nccl.so")
    return path if os.path.isfile(path) else None


__version__ = "0.1.0"

__all__ = [
    "init", "Communicator", "AllReduce", "EpLayer", "EpLayout", "EpRouting", "EpDispatchHandle", "ucx_versions",
    "nccl_shim_path",
    "Error", "InvalidArgument", "TimeoutError", "AbortedError", "MismatchError", "NotSupported",
    "BootstrapError", "CudaError", "__version__",
]
