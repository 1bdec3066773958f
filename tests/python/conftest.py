"""Shared fixtures of the ferry Python tests.

CPU tests (test_cpu_*.py) run anywhere:
    PYTHONPATH=build/python python3 -m pytest tests/python -q
GPU tests (marked `gpu`) run under torchrun, every rank the same tests in the
same order, collectives inside:
    PYTHONPATH=build/python torchrun --nproc-per-node N -m pytest tests/python -q
Without a GPU, or when not launched by torchrun, the GPU tests are skipped and
the session ends with a line containing "FERRY PYTHON GPU TESTS SKIPPED".
FERRY_TEST_SHARE_GPUS=1 (as for the C++ GPU tests): ranks may share GPUs, N above
the GPU count ("virtual ranks", correctness only); torch.distributed then uses
gloo, since NCCL refuses two ranks on one GPU.
"""
import os

# Never create NVLink multicast objects (NCCL NVLS, torch symmetric memory,
# NVSHMEM): set before anything initializes NCCL or CUDA.
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"

import dataclasses  # noqa: E402
import datetime  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

GPU_SKIPPED_LINE = "FERRY PYTHON GPU TESTS SKIPPED"
_skipped_key = pytest.StashKey[int]()
_reason_key = pytest.StashKey[str]()


def share_gpus() -> bool:
    """FERRY_TEST_SHARE_GPUS=1: ranks may share GPUs (tests/common/test_util.hpp)."""
    return os.environ.get("FERRY_TEST_SHARE_GPUS") == "1"


def gpu_skip_reason():
    """Why the GPU tests cannot run here, or None."""
    if torch.cuda.device_count() == 0:
        return "no CUDA GPU visible"
    if "WORLD_SIZE" not in os.environ or "LOCAL_RANK" not in os.environ:
        return ("not launched by torchrun (no WORLD_SIZE/LOCAL_RANK); run "
                "`torchrun --nproc-per-node N -m pytest tests/python -q`")
    return None


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs CUDA GPUs and a torchrun launch (skipped otherwise)")


def pytest_collection_modifyitems(config, items):
    reason = gpu_skip_reason()
    skipped = 0
    if reason is not None:
        marker = pytest.mark.skip(reason=f"{GPU_SKIPPED_LINE}: {reason}")
        for item in items:
            if item.get_closest_marker("gpu") is not None:
                item.add_marker(marker)
                skipped += 1
    config.stash[_skipped_key] = skipped
    config.stash[_reason_key] = reason or ""


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    skipped = config.stash.get(_skipped_key, 0)
    if skipped:
        terminalreporter.write_line(
            f"{GPU_SKIPPED_LINE}: {skipped} GPU test(s) skipped: {config.stash.get(_reason_key, '')}",
            yellow=True, bold=True)


@dataclasses.dataclass
class DistEnv:
    rank: int
    world: int
    local_rank: int
    device: torch.device
    comm: object  # ferry.Communicator


@pytest.fixture(scope="session")
def dist_env():
    """torch.distributed (NCCL; gloo when ranks share GPUs) from the torchrun
    environment, and ferry.init(). Session-wide: every GPU test uses the same
    group and communicator."""
    reason = gpu_skip_reason()
    if reason is not None:
        pytest.skip(f"{GPU_SKIPPED_LINE}: {reason}")
    import ferry

    local_rank = int(os.environ["LOCAL_RANK"])
    gpus = torch.cuda.device_count()
    timeout = datetime.timedelta(seconds=300)
    if share_gpus():
        # Virtual ranks: the library's own mapping (local_rank % device count);
        # NCCL refuses two ranks on one GPU, gloo does not care.
        device = torch.device("cuda", local_rank % gpus)
        torch.cuda.set_device(device)
        dist.init_process_group("gloo", timeout=timeout)
    else:
        if local_rank >= gpus:
            raise RuntimeError(f"LOCAL_RANK {local_rank} but only {gpus} GPU(s) visible: "
                               f"launch at most one rank per GPU (or set FERRY_TEST_SHARE_GPUS=1)")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device, timeout=timeout)
    comm = ferry.init()
    env = DistEnv(dist.get_rank(), dist.get_world_size(), local_rank, device, comm)
    assert comm.rank == env.rank and comm.size == env.world, (comm.rank, comm.size, env.rank, env.world)
    yield env
    torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()


@pytest.fixture(autouse=True)
def _seed_per_test(request):
    """Fresh, reproducible default-generator state per test (tests that need
    per-rank streams make their own generators from _helpers.cpu_generator)."""
    from _helpers import stable_seed

    torch.manual_seed(stable_seed(request.node.nodeid))
    yield
