"""ferry.EpLayer dispatch/combine on real GPUs against the pure-PyTorch
reference of _ep_reference.py.

Each round: every rank makes its own tokens, routing and weights (seeded per
test and rank), all ranks all_gather them, the dispatch output is checked row by
row against the placement the contract prescribes (bf16 and fp8 input bytes
exactly; bf16 input quantized to fp8 against max(amax, 1e-4)/448 scales and
round-to-nearest), then a stand-in expert (row * a factor of its global expert
id) feeds combine, checked against the weighted sum with a bf16 tolerance.
Bad calls are made by every rank alike (host checks, no communication).
"""
import dataclasses

import pytest
import torch
import torch.distributed as dist

import ferry
from _ep_reference import (BF16, FP8, KINDS, Problem, SCALE_GROUP, combine_failures, dispatch_failures,
                           expert_factor, make_input, stand_in_outputs)
from _helpers import check_all_ranks, expect_error, expect_invalid, non_contiguous, other_device, stable_seed

pytestmark = pytest.mark.gpu

MAX_TOKENS, HIDDEN = 96, 512
MODES = ("high_throughput", "low_latency")


def experts_and_topk(world):
    """4 local experts per rank (8 on one rank) and top-5: tokens pick several
    experts of one rank, and more experts than one rank holds."""
    return (4 * world if world > 1 else 8), 5


def problem(env, **kw) -> Problem:
    E, K = experts_and_topk(env.world)
    kw.setdefault("seed", 0)
    return Problem(env.world, MAX_TOKENS, HIDDEN, K, E, **kw)


@pytest.fixture(scope="module")
def layers(dist_env):
    """Layers shared by the tests of this module, created on first use (every
    rank in the same order), finalized at the end. Each group form is used."""
    cache = {}
    E, K = experts_and_topk(dist_env.world)

    def get(mode, kind="bf16", alignment=1):
        key = (mode, BF16 if kind == "bf16" else FP8, alignment)
        if key not in cache:
            group = {0: None, 1: dist.group.WORLD, 2: dist_env.comm}[len(cache) % 3]
            cache[key] = ferry.EpLayer(group, MAX_TOKENS, HIDDEN, K, E, dtype=key[1], mode=mode,
                                       expert_alignment=alignment)
        return cache[key]

    yield get
    torch.cuda.synchronize()
    for layer in cache.values():
        layer.finalize()


def gather_inputs(mine):
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, mine)
    return gathered


def run_round(layer, p: Problem, env, mode, alignment=1, out_given=False, keep=None, halves=False, reuse=None,
              mine=None, route_ahead=False):
    """One dispatch + stand-in expert + combine on every rank; returns failures
    (and puts the layout in keep["layout"] when `keep` is given). halves: through
    dispatch_send/dispatch_recv and combine_send/combine_recv, with other work
    queued on the stream between each pair. reuse: the layout whose routing the
    dispatch reuses (mine, this rank's input, then carries that routing). route_ahead:
    layer.route on a side stream first, the dispatch reusing its routing."""
    mine = make_input(p, env.rank) if mine is None else mine
    inputs = gather_inputs(mine)
    x, idx, w = mine.api_args(env.device, p.idx_dtype)
    before = [t.clone() for t in (x if isinstance(x, tuple) else (x,)) + (idx,) + ((w,) if w is not None else ())]
    if route_ahead:
        side = torch.cuda.Stream(device=env.device)
        side.wait_stream(torch.cuda.current_stream(env.device))
        with torch.cuda.stream(side):
            reuse = layer.route(idx)
        torch.cuda.current_stream(env.device).wait_stream(side)
        if reuse.num_tokens != mine.num_tokens:
            return [f"route: num_tokens {reuse.num_tokens}, expected {mine.num_tokens}"]
    if halves:
        handle = layer.dispatch_send(x, None if reuse is not None else idx, w, reuse=reuse)
        busy = torch.randn(256, 256, device=env.device)
        busy = busy @ busy  # the caller's work between the halves
        output, weights, layout = layer.dispatch_recv(handle)
    else:
        output, weights, layout = layer.dispatch(x, None if reuse is not None else idx, w, reuse=reuse)
    failures, ref, rows_ok = dispatch_failures(p, inputs, env.rank, mode, alignment, output, weights, layout)
    after = (x if isinstance(x, tuple) else (x,)) + (idx,) + ((w,) if w is not None else ())
    if any(not torch.equal(a.view(torch.uint8), b.view(torch.uint8)) for a, b in zip(after, before)):
        failures.append("dispatch modified its inputs")
    # Combine is collective: it runs even when the dispatch check failed.
    y = stand_in_outputs(p, env.rank, output, layout.scales, ref) if rows_ok else \
        torch.zeros(output.shape, dtype=BF16, device=env.device)
    out = torch.full((mine.num_tokens, p.hidden), float("nan"), dtype=BF16, device=env.device) if out_given else None
    if halves:
        layer.combine_send(y, layout)
        busy = busy @ busy
        combined = layer.combine_recv(layout, out=out)
    else:
        combined = layer.combine(y, layout, out=out)
    if keep is not None:
        keep["layout"] = layout
    if out is not None and combined is not out:
        failures.append("combine did not return `out`")
    if rows_ok:
        failures += combine_failures(p, mine, combined)
    return failures


def capture(step):
    """step() run once on a side stream (warm-up outside the capture), then
    captured; -> (graph, what the captured step returned)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    # thread_local: only this thread's unsafe calls (a host sync in the layer)
    # break the capture, not torch's NCCL watchdog thread.
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        result = step()
    return graph, result


def _id(v):
    return str(v).replace("torch.", "")


@pytest.mark.parametrize("idx_dtype", [torch.int32, torch.int64], ids=_id)
@pytest.mark.parametrize("with_weights", [True, False], ids=["weights", "no_weights"])
@pytest.mark.parametrize("routing", ["uniform", "drops", "skewed"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", MODES)
def test_dispatch_combine(layers, dist_env, mode, kind, routing, with_weights, idx_dtype):
    """T' in [1, max_tokens] per rank (different on every rank)."""
    p = problem(dist_env, kind=kind, routing=routing, with_weights=with_weights, idx_dtype=idx_dtype,
                seed=stable_seed(mode, kind, routing, with_weights, _id(idx_dtype)))
    failures = run_round(layers(mode, kind), p, dist_env, mode, out_given=with_weights)
    check_all_ranks(failures, f"{mode} {kind} {routing}")


@pytest.mark.parametrize("counts", ["full", "some_zero", "only_rank0", "all_zero"])
@pytest.mark.parametrize("kind", ["bf16", "fp8"])
@pytest.mark.parametrize("mode", MODES)
def test_token_counts(layers, dist_env, mode, kind, counts):
    """T = max_tokens, and T = 0 on some or all ranks."""
    p = problem(dist_env, kind=kind, counts=counts, routing="drops", seed=stable_seed("counts", mode, kind, counts))
    check_all_ranks(run_round(layers(mode, kind), p, dist_env, mode), f"{mode} {kind} {counts}")


@pytest.mark.parametrize("mode", MODES)
def test_no_token_has_an_expert(layers, dist_env, mode):
    p = problem(dist_env, routing="none", counts="full", seed=stable_seed("none", mode))
    check_all_ranks(run_round(layers(mode), p, dist_env, mode, out_given=True), f"{mode} all -1")


@pytest.mark.parametrize("kind", KINDS)
def test_expert_alignment(layers, dist_env, kind):
    """high_throughput blocks start at multiples of expert_alignment (padding
    rows are NaN in the expert output: combine must not read them)."""
    for i, routing in enumerate(("uniform", "skewed", "drops")):
        p = problem(dist_env, kind=kind, routing=routing, seed=stable_seed("align", kind, i))
        failures = run_round(layers("high_throughput", kind, 16), p, dist_env, "high_throughput", alignment=16)
        check_all_ranks(failures, f"alignment 16 {kind} {routing}")


def test_layer_properties(layers, dist_env):
    E, _ = experts_and_topk(dist_env.world)
    for mode in MODES:
        assert layers(mode).local_experts == E // dist_env.world
    layers("high_throughput").barrier()
    layers("low_latency").barrier()


@pytest.mark.parametrize("kind", KINDS)
def test_low_latency_cuda_graph(layers, dist_env, kind):
    """dispatch + an elementwise expert + combine captured once, replayed with
    new tokens, routing and weights copied into the static tensors."""
    env, layer = dist_env, layers("low_latency", kind)
    p0 = problem(env, kind=kind, counts="full", seed=stable_seed("graph", kind, "warm"))
    L, G = p0.local_experts, p0.groups
    x_s, idx_s, w_s = make_input(p0, env.rank).api_args(env.device, torch.int64)
    factor = expert_factor(torch.arange(env.rank * L, (env.rank + 1) * L)).to(env.device)

    def step():
        output, weights, layout = layer.dispatch(x_s, idx_s, w_s)
        vals = output.float()
        if kind != "bf16":
            vals = vals * layout.scales.reshape(L, p0.capacity, G).repeat_interleave(SCALE_GROUP, dim=2)
        y = (vals * factor[:, None, None]).to(BF16)
        return output, weights, layout, layer.combine(y, layout)

    graph, (output, weights, layout, combined) = capture(step)

    failures = []
    for i, routing in enumerate(("uniform", "skewed", "drops", "uniform")):
        p = problem(env, kind=kind, counts="full", routing=routing, seed=stable_seed("graph", kind, i))
        mine = make_input(p, env.rank)
        inputs = gather_inputs(mine)
        x, idx, w = mine.api_args(env.device, torch.int64)
        for static, new in zip((x_s if isinstance(x_s, tuple) else (x_s,)) + (idx_s, w_s),
                               (x if isinstance(x, tuple) else (x,)) + (idx, w)):
            static.copy_(new)
        combined.fill_(float("nan"))
        graph.replay()
        f, _, rows_ok = dispatch_failures(p, inputs, env.rank, "low_latency", 1, output, weights, layout)
        if rows_ok:
            f += combine_failures(p, mine, combined)
        failures += [f"replay {i} ({routing}): {m}" for m in f]
    torch.cuda.synchronize()
    del graph
    # The layer keeps working eagerly after the replays.
    p = problem(env, kind=kind, routing="drops", seed=stable_seed("graph", kind, "eager"))
    failures += [f"eager round after the replays: {m}" for m in run_round(layer, p, env, "low_latency")]
    check_all_ranks(failures, f"low_latency graph {kind}")


@pytest.mark.parametrize("kind", ["bf16", "fp8"])
@pytest.mark.parametrize("mode", MODES)
def test_halves(layers, dist_env, mode, kind):
    """dispatch_send / dispatch_recv / combine_send / combine_recv with other work
    queued between each pair, two rounds in a row (with and without weights)."""
    env, layer = dist_env, layers(mode, kind)
    failures = []
    for i, with_weights in enumerate((True, False)):
        p = problem(env, kind=kind, routing="drops", with_weights=with_weights, seed=stable_seed("halves", mode, i))
        failures += [f"round {i}: {m}" for m in run_round(layer, p, env, mode, halves=True, out_given=i == 0)]
    check_all_ranks(failures, f"{mode} {kind} halves")


@pytest.mark.parametrize("halves", [False, True], ids=["whole", "halves"])
@pytest.mark.parametrize("mode", MODES)
def test_reuse_routing(layers, dist_env, mode, halves):
    """dispatch(reuse=layout): new tokens and weights with the latest dispatch's
    routing (exp_indices None), checked against that routing; then a fresh
    dispatch works again."""
    env, layer = dist_env, layers(mode)
    p1 = problem(env, counts="full", routing="drops", seed=stable_seed("reuse", mode, halves, 1))
    keep = {}
    failures = [f"first: {m}" for m in run_round(layer, p1, env, mode, keep=keep)]
    first = make_input(p1, env.rank)
    p2 = problem(env, counts="full", routing="drops", seed=stable_seed("reuse", mode, halves, 2))
    mine = dataclasses.replace(make_input(p2, env.rank), idx=first.idx)  # new tokens and weights, old routing
    failures += [f"reused: {m}" for m in run_round(layer, p2, env, mode, halves=halves, reuse=keep["layout"],
                                                   mine=mine)]
    p3 = problem(env, routing="skewed", seed=stable_seed("reuse", mode, halves, 3))
    failures += [f"after: {m}" for m in run_round(layer, p3, env, mode)]
    check_all_ranks(failures, f"{mode} reuse ({'halves' if halves else 'whole'})")


@pytest.mark.parametrize("halves", [False, True], ids=["whole", "halves"])
@pytest.mark.parametrize("mode", MODES)
def test_route_ahead(layers, dist_env, mode, halves):
    """layer.route(exp_indices) on a side stream, then dispatch(reuse=routing) with
    exp_indices None: a fresh routing each round (drops, skewed, ranks with no tokens),
    checked like any round; a combine with the layout of the dispatch before a route
    raises; a plain dispatch works after."""
    env, layer = dist_env, layers(mode)
    failures = []
    keep = {}
    for i, (routing, counts) in enumerate((("drops", "varied"), ("skewed", "some_zero"), ("uniform", "full"))):
        p = problem(env, routing=routing, counts=counts, seed=stable_seed("route ahead", mode, halves, i))
        failures += [f"round {i} ({routing}): {m}"
                     for m in run_round(layer, p, env, mode, halves=halves, route_ahead=True, keep=keep)]
    stale = keep["layout"]
    layer.route(make_input(p, env.rank).api_args(env.device, p.idx_dtype)[1])
    y = torch.zeros((max(stale.num_rows, 0), p.hidden) if mode == "high_throughput"
                    else (stale.local_experts, env.world * p.max_tokens, p.hidden), dtype=BF16, device=env.device)
    try:
        layer.combine(y, stale)
        failures.append("combine with the layout of the dispatch before a route did not raise")
    except ferry.InvalidArgument as e:
        if "older" not in str(e):
            failures.append(f"combine with a stale layout: unexpected message: {e}")
    p = problem(env, routing="drops", seed=stable_seed("route ahead", mode, halves, "after"))
    failures += [f"after: {m}" for m in run_round(layer, p, env, mode)]
    check_all_ranks(failures, f"{mode} route ahead ({'halves' if halves else 'whole'})")


def test_high_throughput_cuda_graph_without_sync(layers, dist_env):
    """dispatch(sync=False) + the stand-in expert (each row times its expert's
    factor, the row's expert found on the GPU from expert_offsets) + combine,
    captured once and replayed with new tokens, routing and weights; after each
    replay the output, cut to the device extents, meets the synchronized
    contract checks and the combine matches the reference."""
    env, layer = dist_env, layers("high_throughput")
    p0 = problem(env, counts="full", seed=stable_seed("ht graph", "warm"))
    L = p0.local_experts
    x_s, idx_s, w_s = make_input(p0, env.rank).api_args(env.device, torch.int64)
    factor = expert_factor(torch.arange(env.rank * L, (env.rank + 1) * L)).to(env.device)

    def step():
        output, weights, layout = layer.dispatch(x_s, idx_s, w_s, sync=False)
        rows = torch.arange(output.shape[0], device=env.device)
        expert = torch.searchsorted(layout.expert_offsets[1:], rows, right=True).clamp(max=L - 1)
        y = (output.float() * factor[expert][:, None]).to(BF16)
        return output, weights, layout, layer.combine(y, layout)

    graph, (output, weights, layout, combined) = capture(step)

    failures = []
    if layout.num_rows != -1 or layout.host_expert_counts is not None:
        failures.append(f"unsynced layout has host counts: {layout.num_rows}, {layout.host_expert_counts}")
    for i, routing in enumerate(("uniform", "skewed", "drops")):
        p = problem(env, counts="full", routing=routing, seed=stable_seed("ht graph", i))
        mine = make_input(p, env.rank)
        inputs = gather_inputs(mine)
        x, idx, w = mine.api_args(env.device, torch.int64)
        for static, new in zip((x_s, idx_s, w_s), (x, idx, w)):
            static.copy_(new)
        combined.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        rows = int(layout.expert_offsets[-1].item())
        cut = dataclasses.replace(layout, num_rows=rows, host_expert_counts=layout.expert_counts.tolist())
        f, _, rows_ok = dispatch_failures(p, inputs, env.rank, "high_throughput", 1, output[:rows],
                                          None if weights is None else weights[:rows], cut)
        if rows_ok:
            f += combine_failures(p, mine, combined)
        failures += [f"replay {i} ({routing}): {m}" for m in f]
    del graph
    check_all_ranks(failures, "high_throughput graph without sync")


# ---------------------------------------------------------------- bad calls
def _valid_args(env, mode):
    p = problem(env, counts="full", seed=stable_seed("bad", mode))
    return p, make_input(p, env.rank).api_args(env.device, torch.int64)


@pytest.mark.parametrize("mode", MODES)
def test_bad_dispatch_arguments(layers, dist_env, mode):
    layer = layers(mode)
    p, (x, idx, w) = _valid_args(dist_env, mode)
    bad = [
        ("input", (x.cpu(), idx, w), "cuda"), ("input", (x.float(), idx, w), "bfloat16"),
        ("input", (x[:, :HIDDEN - SCALE_GROUP].contiguous(), idx, w), str(HIDDEN)),
        ("input", (x.reshape(-1), idx, w), ""), ("input", (non_contiguous(x), idx, w), "contiguous"),
        ("input", ((x.to(FP8), torch.ones(MAX_TOKENS, HIDDEN // 128, device=x.device)), idx, w), ""),
        ("max_tokens", (torch.cat([x, x[:1]]), torch.cat([idx, idx[:1]]), torch.cat([w, w[:1]])), ""),
        ("exp_indices", (x, idx.float(), w), "int32"), ("exp_indices", (x, idx.cpu(), w), "cuda"),
        ("exp_indices", (x, idx[:, :-1].contiguous(), w), ""), ("exp_indices", (x, idx[:-1], w), ""),
        ("exp_indices", (x, non_contiguous(idx), w), "contiguous"),
        ("weight", (x, idx, w.to(BF16)), "float32"), ("weight", (x, idx, w.cpu()), "cuda"),
        ("weight", (x, idx, w[:-1]), ""), ("weight", (x, idx, w[:, :-1].contiguous()), ""),
        ("weight", (x, idx, non_contiguous(w)), "contiguous"),
    ]
    other = other_device(dist_env.device)
    if other is not None:
        bad += [("input", (x.to(other), idx, w), "cuda"), ("exp_indices", (x, idx.to(other), w), "cuda"),
                ("weight", (x, idx, w.to(other)), "cuda")]
    for name, args, frag in bad:
        expect_invalid(lambda: layer.dispatch(*args), name, *([frag] if frag else []))
    expect_error(TypeError, lambda: layer.dispatch("tokens", idx, w), name="input")
    expect_error(TypeError, lambda: layer.dispatch(x, idx.tolist(), w), name="exp_indices")
    expect_error(TypeError, lambda: layer.dispatch(x, idx, 1.0), name="weight")
    # The layer still works.
    check_all_ranks(run_round(layer, p, dist_env, mode), f"{mode} round after bad dispatches")


@pytest.mark.parametrize("mode", MODES)
def test_bad_combine_arguments(layers, dist_env, mode):
    layer = layers(mode)
    p, (x, idx, w) = _valid_args(dist_env, mode)
    mine = make_input(p, dist_env.rank)
    inputs = gather_inputs(mine)
    output, weights, layout = layer.dispatch(x, idx, w)
    failures, ref, rows_ok = dispatch_failures(p, inputs, dist_env.rank, mode, 1, output, weights, layout)
    y = stand_in_outputs(p, dist_env.rank, output, layout.scales, ref) if rows_ok else \
        torch.zeros(output.shape, dtype=BF16, device=dist_env.device)
    T, H = x.shape
    good_out = torch.empty(T, H, dtype=BF16, device=x.device)
    bad = [
        ("expert_output", (y.float(), layout), "bfloat16"), ("expert_output", (y.cpu(), layout), "cuda"),
        ("expert_output", (y[..., :H - SCALE_GROUP].contiguous(), layout), ""),
        ("expert_output", (y.reshape(-1), layout), ""), ("expert_output", (non_contiguous(y), layout), "contiguous"),
        ("out", (y, layout, good_out.float()), "bfloat16"), ("out", (y, layout, good_out.cpu()), "cuda"),
        ("out", (y, layout, good_out[:-1]), ""), ("out", (y, layout, good_out[:, :-SCALE_GROUP].contiguous()), ""),
        ("out", (y, layout, non_contiguous(good_out)), "contiguous"),
    ]
    other = other_device(dist_env.device)
    if other is not None:
        bad += [("expert_output", (y.to(other), layout), "cuda"), ("out", (y, layout, good_out.to(other)), "cuda")]
    for name, args, frag in bad:
        expect_invalid(lambda: layer.combine(*args), name, *([frag] if frag else []))
    expect_error(TypeError, lambda: layer.combine("rows", layout), name="expert_output")
    combined = layer.combine(y, layout, out=good_out)
    if rows_ok:
        failures += combine_failures(p, mine, combined)
    check_all_ranks(failures, f"{mode} combine after bad combines")


@pytest.mark.parametrize("mode", MODES)
def test_only_the_latest_layout_combines(layers, dist_env, mode):
    """A full round, then a second dispatch: combine with the first round's
    layout raises ferry.Error (no communication); with the latest one it works."""
    layer, env = layers(mode), dist_env
    kept = {}
    check_all_ranks(run_round(layer, problem(env, seed=stable_seed("stale", mode, 0)), env, mode, keep=kept),
                    "first round")
    p = problem(env, seed=stable_seed("stale", mode, 1))
    mine = make_input(p, env.rank)
    inputs = gather_inputs(mine)
    output, weights, layout = layer.dispatch(*mine.api_args(env.device, p.idx_dtype))
    failures, ref, rows_ok = dispatch_failures(p, inputs, env.rank, mode, 1, output, weights, layout)
    y = stand_in_outputs(p, env.rank, output, layout.scales, ref) if rows_ok else \
        torch.zeros(output.shape, dtype=BF16, device=env.device)
    expect_error(ferry.Error, lambda: layer.combine(y, kept["layout"]))
    combined = layer.combine(y, layout)
    if rows_ok:
        failures += combine_failures(p, mine, combined)
    check_all_ranks(failures, f"{mode} latest layout after a stale one")


@pytest.mark.parametrize("mode", MODES)
def test_finalized_layer_raises(dist_env, mode):
    env = dist_env
    small = ferry.EpLayer(None, 8, 128, 1, env.world, mode=mode)
    x = torch.randn(4, 128, device=env.device).to(BF16)
    idx = (torch.arange(4, device=env.device) % env.world).reshape(4, 1)
    output, _, layout = small.dispatch(x, idx)
    y = output.clone()
    combined = small.combine(y, layout)
    ok = torch.equal(combined, x)  # one expert per token, unweighted, identity expert
    small.barrier()
    small.finalize()
    check_all_ranks([] if ok else ["identity round on the small layer"], "small layer")
    expect_error(ferry.Error, lambda: small.dispatch(x, idx), "finalized")
    expect_error(ferry.Error, lambda: small.combine(y, layout), "finalized")
    expect_error(ferry.Error, lambda: small.barrier(), "finalized")
