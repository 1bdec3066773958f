"""Helpers shared by the ferry Python tests (CPU and GPU).

GPU tests run under torchrun: every rank runs the same tests in the same order.
A rank must never skip a collective that the others make, so the GPU tests
collect their failures as strings and hand them to `check_all_ranks`, which
gathers every rank's list and fails the test on every rank alike (each rank then
reports all ranks' failures).
"""
import re
import zlib

import pytest
import torch
import torch.distributed as dist

import ferry


# ---------------------------------------------------------------- seeds
def stable_seed(*parts) -> int:
    """A seed from a tuple of values, the same in every process (Python's own
    hash() is salted per process, so it must not be used for this)."""
    return zlib.crc32(repr(parts).encode()) & 0x7FFFFFFF


def cpu_generator(*parts) -> torch.Generator:
    """A CPU generator for one named stream (deterministic on every machine)."""
    return torch.Generator().manual_seed(stable_seed(*parts))


# ---------------------------------------------------------------- error messages
def names(msg: str, name: str) -> bool:
    """Whether `name` occurs in `msg` as a whole word (case-insensitive): "out"
    does not match "expert_output"."""
    return re.search(r"(?<![A-Za-z0-9_])" + re.escape(name) + r"(?![A-Za-z0-9_])", msg, re.IGNORECASE) is not None


def expect_error(exc, fn, *fragments, name=None):
    """Runs fn(), expects `exc`. `name` (a string, or a tuple of acceptable
    spellings) must occur in the message as a whole word; every fragment must
    occur in it (case-insensitive). Returns the message."""
    with pytest.raises(exc) as info:
        fn()
    msg = str(info.value)
    kind = type(info.value).__name__
    if name is not None:
        spellings = (name,) if isinstance(name, str) else tuple(name)
        assert any(names(msg, n) for n in spellings), f"expected the argument {name!r} in the {kind} message: {msg!r}"
    for frag in fragments:
        assert frag.lower() in msg.lower(), f"expected {frag!r} in the {kind} message: {msg!r}"
    return msg


def expect_invalid(fn, name, *fragments):
    """ferry.InvalidArgument (also a ValueError and a ferry.Error) naming the
    argument `name` (whole word) and containing every fragment."""
    return expect_error(ferry.InvalidArgument, fn, *fragments, name=name)


# ---------------------------------------------------------------- ranks
def world() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def check_all_ranks(failures, what=""):
    """Collective: fails on every rank if any rank reported a failure."""
    failures = [str(f) for f in failures]
    gathered = [None] * world()
    if dist.is_initialized():
        dist.all_gather_object(gathered, failures)
    else:
        gathered = [failures]
    lines = [f"rank {r}: {f}" for r, fs in enumerate(gathered) for f in fs[:20]]
    extra = sum(max(0, len(fs) - 20) for fs in gathered)
    if lines:
        head = f"{what}: " if what else ""
        pytest.fail(head + f"{sum(len(fs) for fs in gathered)} failure(s)\n" + "\n".join(lines)
                    + (f"\n... and {extra} more" if extra else ""), pytrace=False)


def all_gather_tensors(t: torch.Tensor) -> list:
    """Collective: every rank's `t` (same shape and dtype on every rank), on
    t's device. Under gloo (ranks sharing GPUs, see conftest.py) it goes through
    host copies: gloo implements only some collectives for CUDA tensors."""
    via_host = dist.get_backend() == "gloo" and t.device.type != "cpu"
    src = t.cpu() if via_host else t.contiguous()
    got = [torch.empty_like(src) for _ in range(world())]
    dist.all_gather(got, src)
    return [g.to(t.device) for g in got] if via_host else got


def checksum(t: torch.Tensor) -> torch.Tensor:
    """Two int64 sums over the tensor's bytes (one position-weighted): equal bytes
    give equal checksums; a difference anywhere almost surely changes them."""
    b = t.detach().contiguous().reshape(-1).view(torch.uint8).to(torch.int64)
    pos = torch.arange(b.numel(), device=b.device, dtype=torch.int64) % 65521 + 1
    return torch.stack([b.sum(), (b * pos).sum()])


def same_on_all_ranks(t: torch.Tensor):
    """Collective: None if `t` has the same bytes on every rank, else a message."""
    c = checksum(t)
    if world() == 1:
        return None
    got = all_gather_tensors(c)
    if any(not torch.equal(g, got[0]) for g in got):
        return f"result differs across ranks (byte checksums {[g.tolist() for g in got]})"
    return None


def other_device(device: torch.device):
    """Another visible CUDA device than `device`, or None with a single GPU."""
    n = torch.cuda.device_count()
    return torch.device("cuda", (device.index + 1) % n) if n > 1 else None


def non_contiguous(t: torch.Tensor) -> torch.Tensor:
    """A non-contiguous tensor equal to `t` (same shape, dtype, device): a view
    taking every other element along its last dimension of size > 1."""
    dims = [d for d in range(t.dim()) if t.shape[d] > 1]
    assert dims, f"no non-contiguous view of shape {tuple(t.shape)}"
    d = dims[-1]
    wide_shape = list(t.shape)
    wide_shape[d] *= 2
    wide = torch.zeros(wide_shape, dtype=t.dtype, device=t.device)
    nc = wide[(slice(None),) * d + (slice(None, None, 2),)]
    nc.copy_(t)
    assert not nc.is_contiguous() and nc.shape == t.shape
    return nc


def ep_spec(**kw):
    """A small EpSpec for the CPU checks (device None: no device check), with kw overriding."""
    from ferry._ep import EpSpec

    args = dict(max_tokens=8, hidden=256, topk=2, num_experts=8, world_size=2, dtype=torch.bfloat16,
                weight_dtype=torch.float32, device=None, mode="high_throughput")
    args.update(kw)
    return EpSpec(**args)


def ep_spec_invalid(name, *fragments, **kw):
    """EpSpec(**kw) rejected at construction or by validate()."""
    return expect_invalid(lambda: ep_spec(**kw).validate(), name, *fragments)


class ReachedInit(Exception):
    """Raised by the stand-in for ferry._ep.init that layer_stops_at_init installs."""


def layer_stops_at_init(monkeypatch, world_size=2):
    """EpLayer's checks without a group, for the CPU tests: ferry._ep.init (collective) raises ReachedInit and
    the group's size is world_size. Returns ferry._ep; a layer whose config is valid raises ReachedInit."""
    import ferry._ep as ep

    def init(group):
        raise ReachedInit()

    monkeypatch.setattr(ep, "init", init)
    monkeypatch.setattr(ep, "_group_size", lambda group: world_size)
    return ep

