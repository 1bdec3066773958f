"""ferry.init() from MPI, with no torch.distributed: launched by mpirun.

    mpirun -np 2 python3 -m pytest -q -rs tests/python/test_mpi_init.py

Skipped when not launched by mpirun (e.g. inside the torchrun suite) or without
a GPU per rank; the skip reason then contains "FERRY PYTHON MPI TESTS SKIPPED".
"""
import os

import pytest
import torch

import ferry

MPI_SKIPPED_LINE = "FERRY PYTHON MPI TESTS SKIPPED"
_size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", "0")))
if _size == 0:
    pytest.skip(f"{MPI_SKIPPED_LINE}: not launched by mpirun", allow_module_level=True)
if torch.cuda.device_count() < _size:
    pytest.skip(f"{MPI_SKIPPED_LINE}: {_size} ranks but {torch.cuda.device_count()} GPU(s)", allow_module_level=True)


@pytest.fixture(scope="module")
def comm():
    return ferry.init()  # MPI: no process group exists


def test_mpi_communicator(comm):
    assert comm.size == _size
    assert 0 <= comm.rank < comm.size
    assert torch.cuda.current_device() == comm.device  # torch follows ferry's GPU


def test_mpi_allreduce_sum(comm):
    ar = ferry.AllReduce(comm, max_bytes=1 << 20)
    n = 1000
    # Rank r holds r + 1 + i; the sum over ranks is exact in float32.
    x = torch.arange(n, dtype=torch.float32, device="cuda") + float(comm.rank + 1)
    out = torch.full_like(x, float("nan"))
    ar.allreduce(x, out=out)
    torch.cuda.synchronize()
    expected = torch.arange(n, dtype=torch.float32) * comm.size + comm.size * (comm.size + 1) / 2
    assert torch.equal(out.cpu(), expected)


def test_mpi_ep_round_trip(comm):
    """Each token picks expert (token + rank) % E once, weight 1: combine of the
    unchanged dispatch output gives back every token exactly (bf16 in and out)."""
    T, H, E = 64, 256, 2 * comm.size
    layer = ferry.EpLayer(comm, T, H, 1, E)
    x = torch.randn(T, H, device="cuda").bfloat16()
    idx = ((torch.arange(T, device="cuda") + comm.rank) % E).view(T, 1)
    output, weights, layout = layer.dispatch(x, idx, torch.ones(T, 1, device="cuda"))
    assert sum(layout.host_expert_counts) == layout.num_rows == output.shape[0]
    back = layer.combine(output.clone(), layout)
    torch.cuda.synchronize()
    assert torch.equal(back, x)
    layer.finalize()
