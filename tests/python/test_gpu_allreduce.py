"""ferry.AllReduce against torch.distributed.all_reduce (NCCL; gloo when ranks
share GPUs, FERRY_TEST_SHARE_GPUS=1: see conftest.py), on real GPUs.

Every op x type at several sizes, with fresh random inputs per call and
poisoned outputs (NaN, or an integer no reduction here can produce), through
out=None, a given out, and out=x (in place), then inside a CUDA graph replayed
on new inputs. Every result must have the same bytes on every rank.

Tolerances (floating types; integers must match exactly, as must min and max):
with n ranks and u the type's unit roundoff (2^-8 bf16, 2^-11 fp16, 2^-24 fp32,
2^-53 fp64), both ferry (fp32 accumulation for 16-bit types, one final rounding)
and NCCL or gloo (possibly a rounding after every step of its ring) are within
(n + 1) u sum_r |x_r| of the exact sum, so they differ by at most
(2n + 2) u sum_r |x_r| (divided by n for avg, which is checked as sum / n); for
prod the same bound relative to prod_r |x_r| (no cancellation in a product).
"""
import pytest
import torch
import torch.distributed as dist

import ferry
from _helpers import (check_all_ranks, expect_error, expect_invalid, non_contiguous, other_device, same_on_all_ranks,
                      stable_seed)

pytestmark = pytest.mark.gpu

TYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16, torch.float16]
OPS = ["sum", "prod", "min", "max", "avg"]
MAX_BYTES = 32 << 20
UNIT_ROUNDOFF = {torch.float32: 2.0 ** -24, torch.float64: 2.0 ** -53, torch.float16: 2.0 ** -11,
                 torch.bfloat16: 2.0 ** -8}
NCCL_OP = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT,
           "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}


def shapes(dtype):
    """1 element, odd sizes (one 2-D), 1 MiB and 32 MiB (= max_bytes)."""
    es = torch.empty(0, dtype=dtype).element_size()
    return [(1,), (3,), (7, 143), (65537,), ((1 << 20) // es,), (MAX_BYTES // es,)]


def _id(v):
    return str(v).replace("torch.", "")


@pytest.fixture(scope="module")
def ar(dist_env):
    return ferry.AllReduce(dist_env.comm, MAX_BYTES)


def make_input(shape, dtype, op, seed_parts, env):
    """Fresh values for one call, different on every rank, chosen so that no
    reduction over <= 8 ranks overflows (and prod stays near 1 for floats)."""
    gen = torch.Generator(device=env.device).manual_seed(stable_seed(*seed_parts, env.rank))
    dev = env.device
    if dtype.is_floating_point:
        work = torch.float64 if dtype == torch.float64 else torch.float32
        if op == "prod":
            v = 1 + (torch.rand(shape, generator=gen, device=dev, dtype=work) - 0.5) / 8
        elif op in ("min", "max"):
            v = torch.randn(shape, generator=gen, device=dev, dtype=work)
        else:
            v = torch.rand(shape, generator=gen, device=dev, dtype=work) * 2 - 1
        return v.to(dtype)
    big = 1 << (30 if dtype == torch.int32 else 62)
    lo, hi = {"prod": (-2, 3), "min": (-big, big), "max": (-big, big)}.get(op, (-1000, 1000))
    return torch.randint(lo, hi, shape, generator=gen, device=dev, dtype=dtype)


def poison(t):
    """Fills `t` with something no correct result here contains."""
    return t.fill_(float("nan") if t.dtype.is_floating_point else torch.iinfo(t.dtype).max)


class Reference:
    """What torch.distributed says for `x` (collective), and the allowed difference.
    gloo reduces every dtype and op used here, CUDA tensors through host copies."""

    def __init__(self, x, op, world):
        self.op, self.dtype, self.world = op, x.dtype, world
        ref = x.clone()
        dist.all_reduce(ref, op=NCCL_OP[op])
        if op == "avg":
            ref = torch.div(ref, world, rounding_mode="trunc") if not x.dtype.is_floating_point else \
                ref.double() / world
        self.ref = ref
        self.tol = None
        if x.dtype.is_floating_point and op in ("sum", "avg", "prod"):
            mag = x.double().abs()
            dist.all_reduce(mag, op=dist.ReduceOp.PRODUCT if op == "prod" else dist.ReduceOp.SUM)
            self.tol = (2 * world + 2) * UNIT_ROUNDOFF[x.dtype] * mag / (world if op == "avg" else 1)

    def failures(self, y, what):
        if y.dtype != self.dtype or y.shape != self.ref.shape:
            return [f"{what}: got {y.dtype}{list(y.shape)}, want {self.dtype}{list(self.ref.shape)}"]
        if self.tol is None:  # exact
            bad = y != self.ref.to(y.dtype)
            if bool(bad.any()):
                i = int(bad.reshape(-1).nonzero()[0])
                return [f"{what}: {int(bad.sum())} of {y.numel()} elements differ, first at {i}: "
                        f"{y.reshape(-1)[i].item()} vs {dist.get_backend()} {self.ref.reshape(-1)[i].item()}"]
            return []
        diff = (y.double() - self.ref.double()).abs()
        bad = ~(diff <= self.tol)  # NaN (a poisoned element never written) is bad too
        if bool(bad.any()):
            i = int(bad.reshape(-1).nonzero()[0])
            return [f"{what}: {int(bad.sum())} of {y.numel()} elements outside tolerance, first at {i}: "
                    f"{y.reshape(-1)[i].item()} vs {dist.get_backend()} {self.ref.reshape(-1)[i].item()} "
                    f"(tolerance {self.tol.reshape(-1)[i].item():.3e})"]
        return []


def int_avg_unsupported(call):
    """Runs an integer avg; True when ferry rejects it cleanly (allowed: the spec
    lists avg without promising it for integers), else the call's result."""
    try:
        return call()
    except ferry.InvalidArgument as e:
        assert "avg" in str(e).lower(), f"integer avg rejected without naming the op: {e}"
        return True


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", TYPES, ids=_id)
def test_allreduce_matches_nccl(ar, dist_env, dtype, op):
    failures = []
    for shape in shapes(dtype):
        for mode in ("out=None", "out", "out=x"):
            what = f"{_id(dtype)} {op} {list(shape)} {mode}"
            x = make_input(shape, dtype, op, ("ar", _id(dtype), op, shape, mode), dist_env)
            x_before = x.clone()
            ref = Reference(x, op, dist_env.world)
            out = poison(torch.empty_like(x)) if mode == "out" else x if mode == "out=x" else None
            y = ar.allreduce(x, op=op, out=out) if dtype.is_floating_point or op != "avg" else \
                int_avg_unsupported(lambda: ar.allreduce(x, op=op, out=out))
            if y is True:
                continue
            if out is not None and y is not out:
                failures.append(f"{what}: did not return `out`")
            if out is None and (y.data_ptr() == x.data_ptr() or y.device != x.device):
                failures.append(f"{what}: out=None returned the input or a tensor on {y.device}")
            if mode != "out=x" and not torch.equal(x, x_before):
                failures.append(f"{what}: the input was modified")
            failures += ref.failures(y, what)
            diverged = same_on_all_ranks(y)
            if diverged:
                failures.append(f"{what}: {diverged}")
    check_all_ranks(failures, f"allreduce {_id(dtype)} {op}")


GRAPH_CASES = [(torch.float32, "sum"), (torch.bfloat16, "sum"), (torch.float16, "max"), (torch.int64, "min"),
               (torch.float64, "avg"), (torch.int32, "prod"), (torch.bfloat16, "avg"), (torch.float32, "prod")]


@pytest.mark.parametrize("shape", [(1,), (1001,), (1 << 18,)], ids=_id)
@pytest.mark.parametrize("dtype,op", GRAPH_CASES, ids=[f"{_id(d)}-{o}" for d, o in GRAPH_CASES])
def test_allreduce_in_cuda_graph(ar, dist_env, dtype, op, shape):
    """One graph with three allreduces (given out, out=None, in place), captured
    once, replayed on new inputs copied into the static tensors."""
    seed = ("graph", _id(dtype), op, shape)
    xa, xb, xc = (make_input(shape, dtype, op, (*seed, "warm", i), dist_env) for i in range(3))
    out_a = torch.empty_like(xa)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture, as torch recommends
        ar.allreduce(xa, op=op, out=out_a)
        ar.allreduce(xb, op=op)
        ar.allreduce(xc, op=op, out=xc)
    torch.cuda.current_stream().wait_stream(side)

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):  # not torch's NCCL watchdog thread
        ar.allreduce(xa, op=op, out=out_a)
        yb = ar.allreduce(xb, op=op)
        yc = ar.allreduce(xc, op=op, out=xc)
    assert yc is xc

    failures = []
    for replay in range(3):
        new = [make_input(shape, dtype, op, (*seed, "replay", replay, i), dist_env) for i in range(3)]
        refs = [Reference(v, op, dist_env.world) for v in new]
        for static, v in zip((xa, xb, xc), new):
            static.copy_(v)
        poison(out_a)
        poison(yb)
        graph.replay()
        for name, y, ref in (("out", out_a, refs[0]), ("out=None", yb, refs[1]), ("out=x", xc, refs[2])):
            what = f"replay {replay} {name}"
            failures += ref.failures(y, what)
            diverged = same_on_all_ranks(y)
            if diverged:
                failures.append(f"{what}: {diverged}")
    torch.cuda.synchronize()
    check_all_ranks(failures, f"graph allreduce {_id(dtype)} {op} {list(shape)}")


def test_algorithm_names(ar, dist_env):
    failures = []
    for nbytes in (4, 1024, 1 << 20, MAX_BYTES):
        name = ar.algorithm(nbytes)
        if not isinstance(name, str) or not name:
            failures.append(f"algorithm({nbytes}) = {name!r}, want a non-empty name")
        gathered = [None] * dist_env.world
        dist.all_gather_object(gathered, name)
        if len(set(gathered)) != 1:
            failures.append(f"algorithm({nbytes}) differs across ranks: {gathered}")
    check_all_ranks(failures, "algorithm names")


def test_bad_calls_raise_before_any_communication(ar, dist_env):
    """Every rank makes the same bad calls (host checks, no collective); a good
    call works afterwards."""
    dev = dist_env.device
    x = torch.ones(1000, device=dev)
    names = ("x", "tensor")
    expect_invalid(lambda: ar.allreduce(x.cpu()), names, "cuda")
    expect_invalid(lambda: ar.allreduce(torch.ones(MAX_BYTES // 4 + 1, device=dev)), names, "max_bytes")
    expect_invalid(lambda: ar.allreduce(x.to(torch.uint8)), names)
    expect_invalid(lambda: ar.allreduce(non_contiguous(torch.ones(10, 10, device=dev))), names, "contiguous")
    expect_invalid(lambda: ar.allreduce(x, op="bogus"), "op")
    expect_invalid(lambda: ar.allreduce(x, out=torch.empty(1000, device=dev, dtype=torch.float64)), "out")
    expect_invalid(lambda: ar.allreduce(x, out=torch.empty(999, device=dev)), "out")
    expect_invalid(lambda: ar.allreduce(x, out=torch.empty(1000)), "out", "cuda")
    other = other_device(dev)
    if other is not None:
        expect_invalid(lambda: ar.allreduce(x.to(other)), names, "cuda")
        expect_invalid(lambda: ar.allreduce(x, out=torch.empty(1000, device=other)), "out", "cuda")
    expect_error(TypeError, lambda: ar.allreduce([1.0, 2.0]), name=names)
    y = ar.allreduce(x)
    check_all_ranks([] if torch.equal(y, torch.full_like(x, dist_env.world)) else ["sum of ones != world"],
                    "good call after bad ones")
