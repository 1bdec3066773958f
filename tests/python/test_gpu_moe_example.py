"""examples/moe_layer.py: the expert-parallel forward through ferry equals the
single-GPU reference within the example's (documented) tolerance, both modes."""
import importlib.util
import pathlib

import pytest
import torch

from _helpers import check_all_ranks

pytestmark = pytest.mark.gpu

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "moe_layer.py"


@pytest.fixture(scope="module")
def moe_layer():
    spec = importlib.util.spec_from_file_location("ferry_example_moe_layer", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _experts(world, per_rank=4):
    return per_rank * world if world > 1 else 8


def _check(moe_layer, argv):
    r = moe_layer.run_check(moe_layer.parse_args(argv))
    failures = [] if r.ok else [f"max abs error {r.max_err:.3e} > tolerance {r.atol:.3e} (max |ref| {r.max_ref:.3e})"]
    check_all_ranks(failures, " ".join(argv))
    assert r.all_ok  # every rank agrees that every rank passed


@pytest.mark.parametrize("mode", ["high_throughput", "low_latency"])
def test_small_layer(dist_env, moe_layer, mode):
    _check(moe_layer, ["--mode", mode, "--tokens", "64", "--hidden", "256", "--ffn", "512",
                       "--experts", str(_experts(dist_env.world)), "--topk", "3", "--seed", "1"])


@pytest.mark.parametrize("mode", ["high_throughput", "low_latency"])
def test_default_sizes(dist_env, moe_layer, mode):
    """The example's defaults (256 tokens, hidden 1024, ffn 2048, top-4), with
    32 experts where the world size divides 32."""
    experts = 32 if 32 % dist_env.world == 0 else _experts(dist_env.world, 8)
    _check(moe_layer, ["--mode", mode, "--experts", str(experts)])


def test_experts_not_divisible_by_world(dist_env, moe_layer):
    if dist_env.world == 1:
        pytest.skip("every expert count is divisible by 1")
    args = moe_layer.parse_args(["--experts", str(4 * dist_env.world + 1), "--topk", "2"])
    with pytest.raises(ValueError, match="divisible"):
        moe_layer.run_check(args)


def test_tolerance_catches_a_misrouted_expert(dist_env, moe_layer):
    """The reference with one slot's expert swapped for another is far outside
    the tolerance the example uses (the check is not vacuous). No collectives."""
    m = moe_layer
    moe = m.build_moe(256, 512, 8, 2, seed=3, device=dist_env.device)
    x = m.make_tokens(64, 256, seed=3, rank=dist_env.rank, device=dist_env.device)
    idx, w = m.route(moe, x)
    ref, mag = m.moe_forward_reference(moe, x, idx, w)
    wrong = idx.clone()
    wrong[:, 0] = (wrong[:, 0] + 1) % 8
    wrong_ref, _ = m.moe_forward_reference(moe, x, wrong, w)
    atol = m.TOLERANCE_FRACTION * mag.max().item()
    assert (wrong_ref - ref).abs().max().item() > 10 * atol
    # and the same computation twice is well inside it
    again, _ = m.moe_forward_reference(moe, x, idx, w)
    assert (again - ref).abs().max().item() <= atol
    assert torch.isfinite(ref).all()
