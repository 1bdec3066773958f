"""ferry.EpLayer(layout="rank_rows") on real GPUs: the rank-rows contract fed to a
gather-based grouped GEMM written in torch, against a single-GPU MoE reference.

Each round: every rank makes its own tokens, routing (with -1 slots and tokens
without any expert) and weights, fresh per test and rank; all ranks all_gather
them. The dispatch result is checked against the contract (docs/python.md,
include/ferry/ep.hpp, EpLayout::kRankRows) derived from every rank's inputs:
one row per (token, source rank) in source order, source_offsets, row_experts,
row weights, expert_counts, expert_offsets (aligned), expert_rows (ascending,
padding -1), the rows' bytes (fp8: their dequantized values). Then each rank runs
its local experts (a linear map W_e [H, H] fp32 per global expert, the same on
every rank) the way an index-gathering grouped GEMM does, from the contract's
fields only:

    for each local expert e: rows = expert_rows[off[e] : off[e] + count[e]]
        y = x[rows].float() @ W_e          (fp8: x dequantized with its scales)
        acc[rows] += weight of e in that row (row_weights where row_experts == e) * y
    combine(acc.to(bf16))

and every element of the combined [T, H] output is checked against
out[t] = sum_k w[t, k] * (x_t @ W_{idx[t, k]}) computed on one GPU in float64
(tolerance: see output_failures). Bad calls are made by every rank alike.

Most tests run twice: sources in rank order, and with own_rows_first (this rank's
every token first, rows of tokens with no expert here included; the reference
places them the same way). The rows without an expert here are NaN in what goes
to combine, which must skip them.

Run (2 GPUs):  PYTHONPATH=build/python torchrun --nproc-per-node 2 -m pytest -q tests/python/test_gpu_ep_rank_rows.py
"""
import dataclasses

import pytest
import torch
import torch.distributed as dist

import ferry
from _helpers import check_all_ranks, cpu_generator, expect_error, expect_invalid, non_contiguous, stable_seed
from _rank_rows_reference import (BF16, FP8, HIDDEN, MAX_TOKENS, SCALE_GROUP, Problem, dispatch_failures,
                                  expert_output, experts_and_topk, gather_inputs, graph_replay_failures,
                                  make_input, output_failures, run_round)

pytestmark = pytest.mark.gpu

# layer dtype bf16; fp8 from bf16 input (quantized in the kernel); fp8 with (q, scales) input
KINDS = ("bf16", "fp8", "fp8_input")
# EpLayer(own_rows_first=...): sources in rank order, or this rank's every token first
# (the copy engine writes those rows for bf16 and fp8 input, the send kernel when it quantizes).
OWN = pytest.mark.parametrize("own", [False, True], ids=["rank_order", "own_first"])


def spans_nodes(env) -> bool:
    """rank_rows is a layout of one node (EpBuffer refuses it across nodes)."""
    return env.comm.local_size < env.comm.size


@pytest.fixture(scope="module")
def node_only(dist_env):
    if spans_nodes(dist_env):  # the same on every rank
        pytest.skip("rank_rows needs the ranks in one node (test_across_nodes_not_supported covers this case)")
    return dist_env


@pytest.fixture(scope="module")
def layers(node_only):
    """Layers shared by this module's tests, created on first use (every rank in
    the same order), finalized at the end, one per (dtype, alignment,
    own_rows_first). Each group form is used."""
    env = node_only
    cache = {}
    E, K = experts_and_topk(env.world)

    def get(kind="bf16", alignment=1, own=False):
        key = (BF16 if kind == "bf16" else FP8, alignment, own)
        if key not in cache:
            group = {0: None, 1: dist.group.WORLD, 2: env.comm}[len(cache) % 3]
            cache[key] = ferry.EpLayer(group, MAX_TOKENS, HIDDEN, K, E, dtype=key[0], mode="high_throughput",
                                       expert_alignment=alignment, layout="rank_rows", own_rows_first=own)
        return cache[key]

    yield get
    torch.cuda.synchronize()
    for layer in cache.values():
        layer.finalize()


@pytest.fixture(scope="module")
def expert_weights(node_only):
    """W [E, H, H] float32 on this rank's GPU, the same on every rank: expert e
    maps a row x to x @ W[e]. Scaled so outputs are O(|x|)."""
    if torch.backends.cuda.matmul.allow_tf32:
        raise RuntimeError("TF32 matmuls are on; the tolerance assumes fp32 expert math (turn TF32 off)")
    E, _ = experts_and_topk(node_only.world)
    g = cpu_generator("rank-rows-experts", E, HIDDEN)
    return (torch.randn(E, HIDDEN, HIDDEN, generator=g) / HIDDEN ** 0.5).to(node_only.device)

def _id(v):
    return str(v).replace("torch.", "")


# ---------------------------------------------------------------- tests
@OWN
@pytest.mark.parametrize("alignment", [1, 16], ids=["align1", "align16"])
@pytest.mark.parametrize("with_weights", [True, False], ids=["weights", "no_weights"])
@pytest.mark.parametrize("routing", ["drops", "skewed", "uniform"])
@pytest.mark.parametrize("kind", KINDS)
def test_rank_rows_moe(layers, expert_weights, node_only, kind, routing, with_weights, alignment, own):
    """T' in [1, max_tokens] per rank (different on every rank); int32 indices
    with skewed routing, int64 otherwise."""
    env = node_only
    idx_dtype = torch.int32 if routing == "skewed" else torch.int64
    p = Problem(env.world, kind, with_weights, routing, "varied", alignment, idx_dtype,
                seed=stable_seed("rank_rows", kind, routing, with_weights, alignment), own_rows_first=own)
    failures = run_round(layers(kind, alignment, own), p, env, expert_weights, out_given=with_weights)
    check_all_ranks(failures, f"rank_rows {kind} {routing} weights={with_weights} alignment={alignment} own={own}")


@OWN
@pytest.mark.parametrize("counts", ["full", "some_zero", "only_rank0", "all_zero"])
@pytest.mark.parametrize("kind", ["bf16", "fp8"])
def test_token_counts(layers, expert_weights, node_only, kind, counts, own):
    """T = max_tokens, and T = 0 on some or all ranks (sources without rows;
    own_rows_first: no own rows either)."""
    env = node_only
    p = Problem(env.world, kind, True, "drops", counts, seed=stable_seed("rank_rows counts", kind, counts),
                own_rows_first=own)
    check_all_ranks(run_round(layers(kind, 1, own), p, env, expert_weights), f"rank_rows {kind} {counts} own={own}")


@OWN
@pytest.mark.parametrize("alignment", [1, 16], ids=["align1", "align16"])
def test_no_token_has_an_expert(layers, expert_weights, node_only, alignment, own):
    """No rows at all; own_rows_first: only own rows, every one all -1, in no list."""
    env = node_only
    p = Problem(env.world, "bf16", True, "none", "full", alignment, seed=stable_seed("rank_rows none", alignment),
                own_rows_first=own)
    check_all_ranks(run_round(layers("bf16", alignment, own), p, env, expert_weights, out_given=True),
                    f"rank_rows all -1 alignment={alignment} own={own}")


@OWN
def test_layer_properties(layers, node_only, own):
    E, _ = experts_and_topk(node_only.world)
    layer = layers("bf16", 1, own)
    assert layer.layout == "rank_rows" and layer.mode == "high_throughput"
    assert layer.own_rows_first is own and layer.spec.config().own_rows_first is own
    assert layer.local_experts == E // node_only.world
    layer.barrier()


@OWN
def test_rounds_back_to_back(layers, expert_weights, node_only, own):
    """Consecutive rounds on one layer, each with new tokens and routing (the
    buffer's index lists and row routing are rewritten every time)."""
    env = node_only
    failures = []
    for i, (kind, routing) in enumerate((("fp8", "skewed"), ("fp8", "drops"), ("fp8", "uniform"), ("fp8", "none"),
                                         ("fp8", "drops"))):
        p = Problem(env.world, kind, i % 2 == 0, routing, "varied", seed=stable_seed("rank_rows rounds", i),
                    own_rows_first=own)
        failures += [f"round {i}: {m}" for m in run_round(layers(kind, 1, own), p, env, expert_weights)]
    check_all_ranks(failures, f"rank_rows back-to-back rounds own={own}")


def test_only_the_latest_layout_combines(layers, expert_weights, node_only):
    """A full round, then a second dispatch: combine with the first round's
    layout raises ferry.Error (no communication); with the latest one it works."""
    env = node_only
    layer = layers()
    kept = {}
    p0 = Problem(env.world, seed=stable_seed("rank_rows stale", 0))
    check_all_ranks(run_round(layer, p0, env, expert_weights, keep=kept), "first round")
    p = Problem(env.world, seed=stable_seed("rank_rows stale", 1))
    mine = make_input(p, env.rank)
    inputs = gather_inputs(mine)
    output, weights, layout = layer.dispatch(*mine.api_args(env.device, p.idx_dtype))
    failures, gemm_ok = dispatch_failures(p, inputs, env.rank, output, weights, layout)
    y = expert_output(p, env.rank, expert_weights, output, weights, layout, gemm_ok)
    stale_y = torch.zeros((max(kept["y"].shape[0], y.shape[0]), HIDDEN), dtype=BF16, device=env.device)
    expect_error(ferry.Error, lambda: layer.combine(stale_y, kept["layout"]))
    combined = layer.combine(y, layout)
    if gemm_ok:
        failures += output_failures(p, mine, expert_weights, combined)
    check_all_ranks(failures, "rank_rows latest layout after a stale one")


def _synced_view(output, weights, layout):
    """The unsynchronized dispatch's result cut to its real extents (read from the
    GPU here, as the caller of a captured graph would), as a synchronized dispatch
    returns it (NOTE [EpLayer dispatch without sync] in python/ferry/_ep.py)."""
    rows = int(layout.source_offsets[-1].item())
    entries = int(layout.expert_offsets[-1].item())
    cut = dataclasses.replace(layout, num_rows=rows, num_index_entries=entries,
                              host_expert_counts=layout.expert_counts.tolist(),
                              row_experts=layout.row_experts[:rows], expert_rows=layout.expert_rows[:entries],
                              scales=None if layout.scales is None else layout.scales[:rows])
    return output[:rows], (None if weights is None else weights[:rows]), cut


@OWN
@pytest.mark.parametrize("kind", ["bf16", "fp8"])
def test_dispatch_without_sync(layers, expert_weights, node_only, kind, own):
    """dispatch(sync=False): outputs span the capacity, num_rows / num_index_entries
    are -1 and host_expert_counts None; cut to the device extents, the result meets
    the same contract checks as a synchronized one, and combine takes it."""
    env = node_only
    layer = layers(kind, 1, own)
    p = Problem(env.world, kind, True, "drops", "varied", seed=stable_seed("rank_rows nosync", kind),
                own_rows_first=own)
    mine = make_input(p, env.rank)
    inputs = gather_inputs(mine)
    output, weights, layout = layer.dispatch(*mine.api_args(env.device, p.idx_dtype), sync=False)
    failures = []
    if layout.num_rows != -1 or layout.num_index_entries != -1 or layout.host_expert_counts is not None:
        failures.append(f"unsynced layout has host counts: num_rows {layout.num_rows}, entries "
                        f"{layout.num_index_entries}, host_expert_counts {layout.host_expert_counts}")
    if output.shape[0] < int(layout.source_offsets[-1].item()):
        failures.append(f"unsynced output has {output.shape[0]} rows, fewer than the real ones")
    out_rows, out_weights, cut = _synced_view(output, weights, layout)
    more, gemm_ok = dispatch_failures(p, inputs, env.rank, out_rows, out_weights, cut)
    failures += more
    y = expert_output(p, env.rank, expert_weights, out_rows, out_weights, cut, gemm_ok)
    combined = layer.combine(y, layout)
    if gemm_ok:
        failures += output_failures(p, mine, expert_weights, combined)
    check_all_ranks(failures, f"rank_rows {kind} dispatch(sync=False) own={own}")


@OWN
def test_dispatch_and_combine_in_a_cuda_graph(layers, node_only, own):
    """dispatch(sync=False) and combine of the rows as they came (no expert: combine
    sums each token's rows, one per rank it reached) captured in one CUDA graph,
    replayed with new tokens and routing copied into the captured inputs: every
    token's output is round_bf16(x * (ranks it reached)) (zeros for none).
    own_rows_first: the own rows (written by the copy engine on a forked stream)
    hold every token, and combine must skip those of tokens with no expert here."""
    env = node_only
    layer = layers("bf16", 1, own)

    def step(x, idx, w):
        rows, _, lay = layer.dispatch(x, idx, w, sync=False)
        return layer.combine(rows, lay)

    def compare(out, want):
        bad = (out != want).any(dim=1)
        return f"{int(bad.sum())} tokens wrong, first {int(bad.nonzero()[0])}" if bad.any() else None

    failures = graph_replay_failures(env, step, "rank_rows graph", compare)
    check_all_ranks(failures, f"rank_rows dispatch + combine in a CUDA graph own={own}")


@OWN
@pytest.mark.parametrize("kind", ["bf16", "fp8"])
def test_halves(layers, expert_weights, node_only, kind, own):
    """dispatch_send / dispatch_recv / combine_send / combine_recv, with other work
    queued between each pair: the same contract and combine checks as a round of
    dispatch + combine."""
    env = node_only
    layer = layers(kind, 1, own)
    p = Problem(env.world, kind, True, "drops", "varied", seed=stable_seed("rank_rows halves", kind),
                own_rows_first=own)
    mine = make_input(p, env.rank)
    inputs = gather_inputs(mine)
    handle = layer.dispatch_send(*mine.api_args(env.device, p.idx_dtype))
    busy = torch.randn(256, 256, device=env.device)
    busy = busy @ busy
    output, weights, layout = layer.dispatch_recv(handle)
    failures, gemm_ok = dispatch_failures(p, inputs, env.rank, output, weights, layout)
    y = expert_output(p, env.rank, expert_weights, output, weights, layout, gemm_ok)
    layer.combine_send(y, layout)
    busy = busy @ busy
    combined = layer.combine_recv(layout)
    if gemm_ok:
        failures += output_failures(p, mine, expert_weights, combined)
    check_all_ranks(failures, f"rank_rows {kind} halves own={own}")


def test_bad_combine_arguments(layers, expert_weights, node_only):
    """expert_output must be bf16 [rows >= num_rows, H], contiguous, on the
    layer's GPU; out bf16 [T, H]. Each bad call raises on every rank before any
    communication; then a good combine works."""
    env = node_only
    layer = layers()
    p = Problem(env.world, counts="full", seed=stable_seed("rank_rows bad combine"))
    mine = make_input(p, env.rank)
    inputs = gather_inputs(mine)
    output, weights, layout = layer.dispatch(*mine.api_args(env.device, p.idx_dtype))
    failures, gemm_ok = dispatch_failures(p, inputs, env.rank, output, weights, layout)
    y = expert_output(p, env.rank, expert_weights, output, weights, layout, gemm_ok)
    T = mine.num_tokens
    good_out = torch.empty(T, HIDDEN, dtype=BF16, device=env.device)
    # every rank receives rows here: full counts, routing with drops, 4+ experts per rank
    rows = y.shape[0]
    bad = [
        ("expert_output", (y.float(), layout), "bfloat16"), ("expert_output", (y.cpu(), layout), "cuda"),
        ("expert_output", (y[:, :HIDDEN - SCALE_GROUP].contiguous(), layout), ""),
        ("expert_output", (y.reshape(-1), layout), ""), ("expert_output", (non_contiguous(y), layout), "contiguous"),
        ("out", (y, layout, good_out.float()), "bfloat16"), ("out", (y, layout, good_out.cpu()), "cuda"),
        ("out", (y, layout, good_out[:-1]), ""), ("out", (y, layout, non_contiguous(good_out)), "contiguous"),
    ]
    if rows > 0:
        bad.append(("expert_output", (y[:rows - 1], layout), str(rows)))
    for name, args, frag in bad:
        expect_invalid(lambda: layer.combine(*args), name, *([frag] if frag else []))
    expect_error(TypeError, lambda: layer.combine("rows", layout), name="expert_output")
    # More rows than the dispatch made are fine (the extra ones are not read).
    y_big = torch.cat([y, torch.full((3, HIDDEN), float("nan"), dtype=BF16, device=env.device)])
    combined = layer.combine(y_big, layout, out=good_out)
    if gemm_ok:
        failures += output_failures(p, mine, expert_weights, combined)
    check_all_ranks(failures, "rank_rows combine after bad combines")


def test_across_nodes_not_supported(dist_env):
    """Across nodes (virtual nodes included) EpBuffer refuses rank_rows, on every
    rank alike; inside one node this test has nothing to check."""
    env = dist_env
    if not spans_nodes(env):
        pytest.skip("the ranks are in one node")
    E, K = experts_and_topk(env.world)
    expect_error(ferry.NotSupported, lambda: ferry.EpLayer(env.comm, 8, 128, K, E, layout="rank_rows"))
