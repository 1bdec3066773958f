"""ferry.init: a Communicator from a torch.distributed group, or from MPI."""

from __future__ import annotations

import ctypes
import os
from typing import Optional, Union

import torch
import torch.distributed as dist

from . import _C

Communicator = _C.Communicator

# Launched by mpirun (OpenMPI, MPICH/Hydra, Slurm's PMI): MPI can bootstrap.
_MPI_ENV = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS")
# The MPI libraries whose symbols MPI's own plugins need (Open MPI, MPICH).
_MPI_LIBRARIES = ("libmpi", "libopen-pal", "libopen-rte", "libpmix")


def _launched_by_mpi() -> bool:
    return any(name in os.environ for name in _MPI_ENV)


def _make_mpi_global() -> None:
    """Python loads extensions with RTLD_LOCAL, so the MPI library that libferry
    pulls in is not visible to the plugins MPI itself dlopens at MPI_Init (Open
    MPI's MCA components), which then fail to resolve its symbols. Reopening the
    already loaded library with RTLD_GLOBAL promotes it (what mpi4py does too)."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "/" in line}
    mpi_paths = sorted(p for p in paths if os.path.basename(p).startswith(_MPI_LIBRARIES) and ".so" in p)
    for path in mpi_paths:
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            pass


def _device_for_torch() -> int:
    """The GPU this process drives: torch's current device once the caller chose it
    (torch.cuda.set_device, as every torchrun job does), else LOCAL_RANK."""
    if not torch.cuda.is_available():
        raise _C.NotSupported("ferry.init: no CUDA device is visible to this process")
    if torch.cuda.is_initialized() or "LOCAL_RANK" not in os.environ:
        return torch.cuda.current_device()
    return int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count()


def _torch_callbacks(group):
    """all_gather(bytes) -> bytes and barrier() through the group's collectives.
    all_gather_object works on every backend (NCCL moves it through the current
    GPU, gloo through the host); the bootstrap only moves handles and ids."""
    size = dist.get_world_size(group)

    def all_gather(data: bytes) -> bytes:
        gathered = [None] * size
        dist.all_gather_object(gathered, data, group=group)
        return b"".join(gathered)

    def barrier() -> None:
        dist.all_gather_object([None] * size, None, group=group)

    return all_gather, barrier


def init(group: Optional[Union["dist.ProcessGroup", Communicator]] = None, *,
         timeout_ms: int = 0) -> Communicator:
    """A ferry Communicator for this process's GPU.

    `group`: a torch.distributed process group; None means the default group when
    torch.distributed is initialized, else MPI when launched by mpirun. A
    Communicator is returned as is. Collective over the group. `timeout_ms`: the
    deadline of every device wait (0: FERRY_TIMEOUT_MS, else 10 s).
    """
    if isinstance(group, Communicator):
        return group
    if group is None and not dist.is_initialized():
        if not _launched_by_mpi():
            raise _C.BootstrapError(
                "ferry.init: no process group: call torch.distributed.init_process_group() first "
                "(torchrun), pass group=, or launch with mpirun")
        device = torch.cuda.current_device() if torch.cuda.is_initialized() else -1
        _make_mpi_global()
        comm = _C.communicator_from_mpi(device=device, timeout_ms=timeout_ms)
        torch.cuda.set_device(comm.device)
        return comm
    if group is None:
        group = dist.group.WORLD
    device = _device_for_torch()
    torch.cuda.set_device(device)
    all_gather, barrier = _torch_callbacks(group)
    return _C.communicator_from_callbacks(rank=dist.get_rank(group), size=dist.get_world_size(group),
                                          all_gather=all_gather, barrier=barrier, device=device,
                                          timeout_ms=timeout_ms)
