"""ferry.EpLayer(layout="rank_rows", zero_copy_combine=True) on real GPUs: the
combine input rows live in layer.combine_input() (this rank's part of the layer's
symmetric memory), where the tokens' home ranks read them while they sum
(NOTE [EP zero-copy combine], src/ep/rank_rows_pull_combine.cu).

Each round (the inputs and the reference of test_gpu_ep_rank_rows.py,
_rank_rows_reference.py): every rank dispatches fresh tokens on a zero-copy layer,
checks the result against the rank-rows contract, runs its local experts (the
index-gathering grouped GEMM) and writes the weighted rows into
combine_input()[:num_rows] with torch ops (rows without an expert here NaN: the
combine skips them), then combines that tensor. The same rows combined by a layer
without the option must give the same output, bit for bit; and the output is
checked against the float64 single-GPU MoE reference. Misuse (another tensor as
expert_output, combine_input() on a layer without the option) raises
ferry.InvalidArgument on every rank before any communication.

Run (2 GPUs):
    PYTHONPATH=build/python torchrun --nproc-per-node 2 -m pytest -q tests/python/test_gpu_ep_zero_copy_combine.py
"""
import pytest
import torch
import torch.distributed as dist

import ferry
from _helpers import check_all_ranks, cpu_generator, expect_invalid, stable_seed
from _rank_rows_reference import (BF16, FP8, HIDDEN, MAX_TOKENS, Problem, dispatch_failures, expert_output,
                                  experts_and_topk, gather_inputs, graph_replay_failures, make_input,
                                  output_failures)

pytestmark = pytest.mark.gpu

# layer dtype bf16; fp8 from bf16 input (quantized in the kernel); fp8 with (q, scales) input
KINDS = ("bf16", "fp8", "fp8_input")
OWN = pytest.mark.parametrize("own", [False, True], ids=["rank_order", "own_first"])


@pytest.fixture(scope="module")
def node_only(dist_env):
    if dist_env.comm.local_size < dist_env.comm.size:  # the same on every rank
        pytest.skip("rank_rows (and zero_copy_combine) needs the ranks in one node")
    return dist_env


@pytest.fixture(scope="module")
def layers(node_only):
    """Rank-rows layers shared by this module's tests, created on first use (every
    rank in the same order), finalized at the end, one per (dtype,
    own_rows_first, zero_copy_combine)."""
    env = node_only
    cache = {}
    E, K = experts_and_topk(env.world)

    def get(kind="bf16", own=False, zero_copy=True):
        key = (BF16 if kind == "bf16" else FP8, own, zero_copy)
        if key not in cache:
            group = {0: None, 1: dist.group.WORLD, 2: env.comm}[len(cache) % 3]
            cache[key] = ferry.EpLayer(group, MAX_TOKENS, HIDDEN, K, E, dtype=key[0], layout="rank_rows",
                                       own_rows_first=own, zero_copy_combine=zero_copy)
        return cache[key]

    yield get
    torch.cuda.synchronize()
    for layer in cache.values():
        layer.finalize()


@pytest.fixture(scope="module")
def expert_weights(node_only):
    """W [E, H, H] float32, the same on every rank (as in test_gpu_ep_rank_rows.py)."""
    if torch.backends.cuda.matmul.allow_tf32:
        raise RuntimeError("TF32 matmuls are on; the tolerance assumes fp32 expert math (turn TF32 off)")
    E, _ = experts_and_topk(node_only.world)
    g = cpu_generator("zero-copy-combine-experts", E, HIDDEN)
    return (torch.randn(E, HIDDEN, HIDDEN, generator=g) / HIDDEN ** 0.5).to(node_only.device)


def _bits_differ(got: torch.Tensor, want: torch.Tensor):
    """None when the two bf16 tensors hold the same bits, else a message."""
    if got.shape != want.shape:
        return f"shape {list(got.shape)} vs {list(want.shape)}"
    bad = (got.view(torch.int16) != want.view(torch.int16)).any(dim=1)
    if bool(bad.any()):
        return f"{int(bad.sum())} of {bad.numel()} tokens differ, first {int(bad.nonzero()[0])}"
    return None


def zero_copy_round(layer, plain, p: Problem, env, w_all, halves=False):
    """One dispatch on the zero-copy layer, the grouped GEMM's rows written into its
    combine_input(), its combine; then the same rows combined by `plain` (a rank-rows
    layer without the option, the same own_rows_first): both outputs must agree bit
    for bit, and with the reference. Returns failures."""
    mine = make_input(p, env.rank)
    inputs = gather_inputs(mine)
    args = mine.api_args(env.device, p.idx_dtype)
    output, weights, layout = layer.dispatch(*args)
    failures, gemm_ok = dispatch_failures(p, inputs, env.rank, output, weights, layout)
    rows = layer.combine_input()  # its shape: test_combine_input_tensor
    num_rows = output.shape[0]
    # Where an expert GEMM's epilogue would write: after this rank's dispatch, in stream order.
    rows[:num_rows] = expert_output(p, env.rank, w_all, output, weights, layout, gemm_ok)
    written = rows[:num_rows].clone()
    if halves:
        layer.combine_send(rows, layout)
        combined = layer.combine_recv(layout)
    else:
        combined = layer.combine(rows, layout)
    _, _, plain_layout = plain.dispatch(*args)
    want = plain.combine(written, plain_layout)
    diff = _bits_differ(combined, want)
    if diff is not None:
        failures.append(f"zero-copy combine differs from the copying combine: {diff}")
    if gemm_ok:
        failures += output_failures(p, mine, w_all, combined)
    return failures


# ---------------------------------------------------------------- tests
@OWN
@pytest.mark.parametrize("routing", ["drops", "skewed", "uniform"])
@pytest.mark.parametrize("kind", KINDS)
def test_zero_copy_round(layers, expert_weights, node_only, kind, routing, own):
    """T' in [1, max_tokens] per rank (different on every rank); int32 indices with
    skewed routing, int64 otherwise."""
    env = node_only
    idx_dtype = torch.int32 if routing == "skewed" else torch.int64
    p = Problem(env.world, kind, True, routing, "varied", 1, idx_dtype,
                seed=stable_seed("zero_copy", kind, routing), own_rows_first=own)
    failures = zero_copy_round(layers(kind, own), layers(kind, own, False), p, env, expert_weights)
    check_all_ranks(failures, f"zero-copy combine {kind} {routing} own={own}")


@OWN
@pytest.mark.parametrize("counts", ["full", "some_zero", "all_zero"])
def test_token_counts(layers, expert_weights, node_only, counts, own):
    """T = max_tokens, and T = 0 on some or all ranks (sources without rows)."""
    env = node_only
    p = Problem(env.world, "bf16", False, "drops", counts, seed=stable_seed("zero_copy counts", counts),
                own_rows_first=own)
    failures = zero_copy_round(layers("bf16", own), layers("bf16", own, False), p, env, expert_weights)
    check_all_ranks(failures, f"zero-copy combine {counts} own={own}")


@OWN
def test_rounds_back_to_back(layers, expert_weights, node_only, own):
    """Consecutive rounds on one layer, each with new tokens and routing: the same
    combine_input() memory is rewritten for every call (after that call's dispatch),
    the previous combine having returned once every home was done reading it."""
    env = node_only
    failures = []
    for i, (routing, halves) in enumerate((("skewed", False), ("drops", True), ("uniform", False), ("none", True),
                                           ("drops", False))):
        p = Problem(env.world, "fp8", i % 2 == 0, routing, "varied", seed=stable_seed("zero_copy rounds", i),
                    own_rows_first=own)
        failures += [f"round {i}: {m}" for m in zero_copy_round(layers("fp8", own), layers("fp8", own, False), p, env,
                                                                 expert_weights, halves=halves)]
    check_all_ranks(failures, f"zero-copy combine back-to-back rounds own={own}")


@OWN
def test_combine_input_tensor(layers, node_only, own):
    """combine_input(): bf16 [rows, hidden] on the layer's GPU, the same memory on
    every call, rows enough for a rank's worst case (world * max_tokens); the layer
    reports the option."""
    env = node_only
    layer = layers("bf16", own)
    first, second = layer.combine_input(), layer.combine_input()
    failures = []
    if first.dtype != BF16 or first.device != env.device or not first.is_contiguous():
        failures.append(f"combine_input() is {first.dtype} on {first.device}, contiguous {first.is_contiguous()}")
    rows = min(layer.spec.dims().capacity_rows, env.world * MAX_TOKENS)
    if tuple(first.shape) != (rows, HIDDEN):
        failures.append(f"combine_input() has shape {list(first.shape)}, want [{rows}, {HIDDEN}]")
    if first.data_ptr() != second.data_ptr() or first is second:
        failures.append("combine_input() is not a new tensor over the same memory on every call")
    if not (layer.zero_copy_combine is True and layer.spec.config().zero_copy_combine is True):
        failures.append("the layer does not report zero_copy_combine")
    if layers("bf16", own, False).zero_copy_combine is not False:
        failures.append("a layer without the option reports zero_copy_combine")
    check_all_ranks(failures, f"combine_input() own={own}")
    layer.barrier()


def test_refusals(layers, expert_weights, node_only):
    """expert_output other than combine_input() (a copy of its rows, the rows of a
    plain tensor) is refused by combine and combine_send on every rank, before any
    communication; combine_input() of a layer without the option raises. The layer
    works afterwards, also with a slice of combine_input() from row 0."""
    env = node_only
    layer = layers()
    plain = layers("bf16", False, False)
    expect_invalid(plain.combine_input, "zero_copy_combine", "combine_input")
    p = Problem(env.world, counts="full", seed=stable_seed("zero_copy refusals"))
    mine = make_input(p, env.rank)
    inputs = gather_inputs(mine)
    output, weights, layout = layer.dispatch(*mine.api_args(env.device, p.idx_dtype))
    failures, gemm_ok = dispatch_failures(p, inputs, env.rank, output, weights, layout)
    rows = layer.combine_input()
    y = expert_output(p, env.rank, expert_weights, output, weights, layout, gemm_ok)
    rows[:y.shape[0]] = y
    others = (rows.clone(), torch.zeros_like(rows), y.clone())
    for other in others:
        expect_invalid(lambda: layer.combine(other, layout), "expert_output", "combine_input")
        expect_invalid(lambda: layer.combine_send(other, layout), "expert_output", "combine_input")
    combined = layer.combine(rows[:y.shape[0]], layout)  # the same memory: accepted
    if gemm_ok:
        failures += output_failures(p, mine, expert_weights, combined)
    check_all_ranks(failures, "zero-copy combine after refused combines")


def test_dispatch_and_combine_in_a_cuda_graph(layers, node_only):
    """dispatch(sync=False), the rows copied into combine_input() as they came (no
    expert) and combine, captured in one CUDA graph and replayed with new tokens and
    routing: every token's output is round_bf16(x * (ranks it reached)). Unsynced,
    the dispatch output spans capacity_rows, which may exceed combine_input()'s rows
    (a rank never holds more than world * max_tokens): the copy takes the common rows."""
    env = node_only
    layer = layers()
    rows_in = layer.combine_input()

    def step(x, idx, w):
        rows, _, lay = layer.dispatch(x, idx, w, sync=False)
        n = min(rows.shape[0], rows_in.shape[0])
        rows_in[:n].copy_(rows[:n])
        return layer.combine(rows_in, lay)

    failures = graph_replay_failures(env, step, "zero_copy graph", _bits_differ)
    check_all_ranks(failures, "zero-copy dispatch + combine in a CUDA graph")
