"""ferry's AllReduce argument checks, no GPU needed (CPU tensors only): the validator
the GPU entry point runs before any device work, ferry._allreduce.check_allreduce_args.
A non-tensor is a TypeError, anything else a ferry.InvalidArgument naming the argument
(the public `x`, the validator's `tensor`) and what was expected. The device check
itself is exercised with device=cuda:0 (a CPU tensor must then be rejected).
"""
import pytest
import torch

import ferry
from _helpers import expect_error, expect_invalid, non_contiguous

CUDA0 = torch.device("cuda", 0)

AR_TYPES = (torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16, torch.float16)
AR_OPS = ("sum", "prod", "min", "max", "avg")
AR_NAME = ("x", "tensor")  # the public argument is `x`; the validator's parameter `tensor`


def _allreduce(x, op="sum", out=None, max_bytes=1 << 10, device=None):
    from ferry._allreduce import check_allreduce_args

    return check_allreduce_args(max_bytes, device, x, op, out)


def test_allreduce_args_valid():
    for dt in AR_TYPES:
        for op in AR_OPS:
            x = torch.zeros(16, dtype=dt)
            _allreduce(x, op)
            _allreduce(x, op, out=x)
            _allreduce(x, op, out=torch.empty_like(x))
        n = 1024 // torch.empty(0, dtype=dt).element_size()
        _allreduce(torch.zeros(n, dtype=dt))  # exactly max_bytes
        _allreduce(torch.zeros(3, 5, dtype=dt))  # any shape, odd sizes


def test_allreduce_args_tensor():
    expect_error(TypeError, lambda: _allreduce([1.0, 2.0]), name=AR_NAME)
    for dt in (torch.float8_e4m3fn, torch.bool, torch.uint8, torch.int8, torch.int16, torch.complex64):
        expect_invalid(lambda: _allreduce(torch.zeros(4, dtype=dt)), AR_NAME)
    expect_invalid(lambda: _allreduce(torch.zeros(257, dtype=torch.float32)), AR_NAME, "max_bytes")
    expect_invalid(lambda: _allreduce(torch.zeros(129, dtype=torch.float64)), AR_NAME, "max_bytes")
    expect_invalid(lambda: _allreduce(non_contiguous(torch.zeros(4, 8))), AR_NAME, "contiguous")


def test_allreduce_args_op():
    x = torch.zeros(4)
    for op in ("bogus", "", "mean", "product"):
        expect_invalid(lambda: _allreduce(x, op), "op")
    with pytest.raises((TypeError, ferry.InvalidArgument)):
        _allreduce(x, 3)


def test_allreduce_args_out():
    x = torch.zeros(4, 8)
    expect_error(TypeError, lambda: _allreduce(x, out=x.tolist()), name="out")
    expect_invalid(lambda: _allreduce(x, out=torch.zeros(4, 8, dtype=torch.float64)), "out", "float32")
    expect_invalid(lambda: _allreduce(x, out=torch.zeros(4, 9)), "out")
    expect_invalid(lambda: _allreduce(x, out=torch.zeros(33)), "out")
    expect_invalid(lambda: _allreduce(x, out=non_contiguous(torch.zeros(4, 8))), "out", "contiguous")


def test_allreduce_args_device():
    msg = expect_invalid(lambda: _allreduce(torch.zeros(4), device=CUDA0), AR_NAME, "cuda")
    assert "CUDA" in msg or "cuda:0" in msg, msg
