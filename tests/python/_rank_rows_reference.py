"""The reference side of tests/python/test_gpu_ep_rank_rows.py: a problem's inputs
(fresh per rank and test), the rank-rows contract they imply, the checks of a
dispatch result against it, the index-gathering grouped GEMM and one checked round."""
import dataclasses

import torch
import torch.distributed as dist

import ferry
from _ep_reference import RankInput as _EpRankInput
from _helpers import cpu_generator, stable_seed

BF16, FP8 = torch.bfloat16, torch.float8_e4m3fn
SCALE_GROUP = 128
MAX_TOKENS, HIDDEN = 96, 512


def experts_and_topk(world):
    """4 local experts per rank (8 on one rank) and top-5: tokens pick several
    experts of one rank, and more experts than one rank holds."""
    return (4 * world if world > 1 else 8), 5


# ---------------------------------------------------------------- inputs
@dataclasses.dataclass(frozen=True)
class Problem:
    world: int
    kind: str = "bf16"
    with_weights: bool = True
    routing: str = "drops"      # uniform | drops | skewed | none
    counts: str = "varied"      # varied | full | some_zero | only_rank0 | all_zero
    alignment: int = 1
    idx_dtype: torch.dtype = torch.int64
    seed: int = 0
    # The layer's EpLayer(own_rows_first=...): this rank's every token first. Not in
    # the repr, which seeds the inputs (make_input): the same inputs either way.
    own_rows_first: bool = dataclasses.field(default=False, repr=False)

    @property
    def num_experts(self):
        return experts_and_topk(self.world)[0]

    @property
    def topk(self):
        return experts_and_topk(self.world)[1]

    @property
    def local_experts(self):
        return self.num_experts // self.world

    @property
    def dtype(self):
        return BF16 if self.kind == "bf16" else FP8


@dataclasses.dataclass
class RankInput(_EpRankInput):
    """_ep_reference's rank input (fields, api_args) with the values in float64:
    the reference MoE here is computed in float64."""

    def values(self) -> torch.Tensor:
        """float64 [T, H]: what the experts are applied to (exact)."""
        if self.x is not None:
            return self.x.double()
        return self.q.view(FP8).double() * self.scales.double().repeat_interleave(SCALE_GROUP, dim=1)


def _fp8_bytes(shape, g):
    """Random e4m3 bytes, NaN (S.1111.111) replaced by +-448 (S.1111.110)."""
    b = torch.randint(0, 256, shape, generator=g, dtype=torch.int32).to(torch.uint8)
    b[(b & 0x7F) == 0x7F] -= 1
    return b


def make_input(p: Problem, rank: int) -> RankInput:
    T_max, K, E, L, H = MAX_TOKENS, p.topk, p.num_experts, p.local_experts, HIDDEN
    G = H // SCALE_GROUP
    g = cpu_generator("rank-rows-input", p, rank)
    varied = 1 + int(torch.randint(T_max, (1,), generator=g))
    T = {"full": T_max, "varied": varied, "some_zero": 0 if rank % 2 else varied,
         "only_rank0": T_max if rank == 0 else 0, "all_zero": 0}[p.counts]
    if p.routing == "none":
        idx = torch.full((T, K), -1, dtype=torch.int64)
    else:
        scores = torch.rand(T, E, generator=g)
        if p.routing == "skewed":  # 85% of the tokens prefer one rank's experts
            hot = p.seed % p.world
            scores[torch.rand(T, generator=g) < 0.85, hot * L:(hot + 1) * L] += 1
        idx = scores.argsort(dim=1, descending=True)[:, :K]               # K distinct experts
        idx = idx.gather(1, torch.rand(T, K, generator=g).argsort(dim=1))  # in random slots
        if p.routing in ("drops", "skewed"):  # some slots, and some whole tokens, without an expert
            idx[torch.rand(T, K, generator=g) < 0.2] = -1
            idx[torch.rand(T, generator=g) < 1 / 16] = -1
    inp = RankInput(T, idx.contiguous())
    if p.with_weights:
        inp.weights = 0.05 + 0.95 * torch.rand(T, K, generator=g)
    if p.kind == "fp8_input":
        inp.q = _fp8_bytes((T, H), g)
        exps = torch.randint(4, 11, (T, G), generator=g).double()
        inp.scales = ((1 + torch.rand(T, G, generator=g, dtype=torch.float64)) * 2.0 ** -exps).float()
    elif p.kind == "fp8":
        # bf16 values the in-kernel quantization reproduces exactly: per 128-column
        # group an e4m3 value times 2^-e, one element +-448 (amax = 448 * 2^-e, so
        # the scale amax / 448 is 2^-e), and some all-zero groups. Then the expert
        # sees the same values on both paths and the check is as tight as for bf16.
        b = _fp8_bytes((T, H), g).view(T, G, SCALE_GROUP)
        col = torch.randint(0, SCALE_GROUP, (T, G, 1), generator=g)
        sign = torch.randint(0, 2, (T, G, 1), generator=g).to(torch.uint8) << 7
        b.scatter_(2, col, 0x7E | sign)
        v = b.reshape(T, H).view(FP8).double()
        e = torch.randint(3, 13, (T, G), generator=g).double()
        e = torch.where(torch.rand(T, G, generator=g) < 1 / 16, torch.inf, e)  # 2^-inf = 0: an all-zero group
        inp.x = (v * (2.0 ** -e).repeat_interleave(SCALE_GROUP, dim=1)).to(BF16)
        assert torch.equal(inp.x.double(), v * (2.0 ** -e).repeat_interleave(SCALE_GROUP, dim=1))
    else:
        mag = 2.0 ** torch.randint(-3, 4, (T, 1), generator=g).double()
        inp.x = (torch.randn(T, H, generator=g, dtype=torch.float64) * mag).to(BF16)
    return inp


def gather_inputs(mine):
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, mine)
    return gathered


# ---------------------------------------------------------------- the contract
@dataclasses.dataclass
class RankRows:
    """What this rank's dispatch must return (CPU tensors)."""
    src: torch.Tensor            # [R, 2] int64: (source rank, source token) of each row
    source_offsets: list         # [W + 1]
    row_experts: torch.Tensor    # [R, K] int32
    row_weights: torch.Tensor    # [R, K] float32 (ones where here when unweighted)
    counts: list                 # [L]
    offsets: list                # [L + 1]
    expert_rows: torch.Tensor    # [offsets[-1]] int32, padding -1


def reference_rank_rows(p: Problem, inputs, me: int, own_rows_first: bool = False) -> RankRows:
    """Sources in rank order, each with its tokens that picked an expert here (in
    token order). own_rows_first: this rank's every token first (row t = token t;
    -1 experts and 0 weights where none is here), then the others in rank order;
    source_offsets[s] stays the first row of source s, [W] the total."""
    L, K, W = p.local_experts, p.topk, len(inputs)
    lo = me * L
    order = [me] + [s for s in range(W) if s != me] if own_rows_first else list(range(W))
    src, row_experts, row_weights, source_offsets, rows = [], [], [], [0] * (W + 1), 0
    for s in order:
        inp = inputs[s]
        here = (inp.idx >= lo) & (inp.idx < lo + L)              # [T, K]
        if own_rows_first and s == me:
            toks = torch.arange(inp.num_tokens)                   # every token, with an expert here or not
        else:
            toks = here.any(dim=1).nonzero()[:, 0]                # source token order
        src.append(torch.stack([torch.full_like(toks, s), toks], dim=1))
        row_experts.append(torch.where(here[toks], inp.idx[toks] - lo, -1).to(torch.int32))
        w = inp.weights if inp.weights is not None else torch.ones(inp.num_tokens, K)
        row_weights.append(torch.where(here[toks], w[toks], 0.0).float())
        source_offsets[s] = rows
        rows += toks.numel()
    source_offsets[W] = rows
    row_experts = torch.cat(row_experts) if row_experts else torch.zeros(0, K, dtype=torch.int32)
    counts, offsets, lists = [], [0], []
    for e in range(L):
        rows = (row_experts == e).any(dim=1).nonzero()[:, 0].to(torch.int32)  # ascending
        size = (rows.numel() + p.alignment - 1) // p.alignment * p.alignment
        counts.append(rows.numel())
        offsets.append(offsets[-1] + size)
        lists.append(torch.cat([rows, torch.full((size - rows.numel(),), -1, dtype=torch.int32)]))
    return RankRows(torch.cat(src), source_offsets, row_experts, torch.cat(row_weights), counts, offsets,
                    torch.cat(lists) if lists else torch.zeros(0, dtype=torch.int32))


def _meta(t) -> str:
    if t is None:
        return "None"
    return f"{t.dtype}{list(t.shape)} on {t.device}"


def _check_tensor(f, name, t, dtype, shape, want=None):
    """Appends a failure unless `t` is a CUDA tensor of dtype and shape (and, when
    `want` is given, equal to it). Returns whether the metadata was right."""
    if not isinstance(t, torch.Tensor) or t.dtype != dtype or tuple(t.shape) != tuple(shape) or not t.is_cuda:
        f.append(f"{name} is {_meta(t)}, want CUDA {dtype}{list(shape)}")
        return False
    if want is not None:
        got = t.cpu()
        if not torch.equal(got, want.to(dtype)):
            bad = (got != want.to(dtype)).reshape(got.shape[0], -1).any(dim=1).nonzero()[:, 0] if got.dim() else []
            first = int(bad[0]) if len(bad) else 0
            f.append(f"{name} differs from the contract in {len(bad)} of {got.shape[0]} rows, first {first}: "
                     f"{got[first].tolist()} vs {want[first].tolist()}")
    return True


def dispatch_failures(p: Problem, inputs, me: int, output, weights, layout):
    """Checks one rank-rows dispatch against the contract. Returns (failures,
    whether the grouped GEMM can run on the result)."""
    ref = reference_rank_rows(p, inputs, me, p.own_rows_first)
    L, K, H, G, W = p.local_experts, p.topk, HIDDEN, HIDDEN // SCALE_GROUP, p.world
    R = ref.source_offsets[-1]
    f = []
    if not isinstance(layout, ferry.EpLayout) or layout.kind != "rank_rows":
        return [f"layout is {type(layout).__name__} of kind {getattr(layout, 'kind', None)!r}, want rank_rows"], False
    if layout.num_tokens != inputs[me].num_tokens:
        f.append(f"layout.num_tokens {layout.num_tokens}, want {inputs[me].num_tokens}")
    if layout.num_rows != R:
        f.append(f"num_rows {layout.num_rows}, want {R} (source_offsets[{W}])")
    if layout.num_index_entries != ref.offsets[-1]:
        f.append(f"num_index_entries {layout.num_index_entries}, want {ref.offsets[-1]} (expert_offsets[{L}])")
    if list(layout.host_expert_counts or []) != ref.counts or layout.host_expert_counts is None:
        f.append(f"host_expert_counts {layout.host_expert_counts}, want {ref.counts}")
    ok = _check_tensor(f, "output", output, p.dtype, (R, H))
    ok &= _check_tensor(f, "expert_counts", layout.expert_counts, torch.int32, (L,), torch.tensor(ref.counts))
    ok &= _check_tensor(f, "expert_offsets", layout.expert_offsets, torch.int64, (L + 1,), torch.tensor(ref.offsets))
    ok &= _check_tensor(f, "source_offsets", layout.source_offsets, torch.int64, (W + 1,),
                        torch.tensor(ref.source_offsets))
    source_rows = [int((ref.src[:, 0] == s).sum()) for s in range(W)]
    ok &= _check_tensor(f, "source_rows", layout.source_rows, torch.int32, (W,), torch.tensor(source_rows))
    ok &= _check_tensor(f, "row_experts", layout.row_experts, torch.int32, (R, K), ref.row_experts)
    ok &= _check_tensor(f, "expert_rows", layout.expert_rows, torch.int32, (ref.offsets[-1],), ref.expert_rows)
    if p.with_weights:
        ok &= _check_tensor(f, "weights (row weights)", weights, torch.float32, (R, K), ref.row_weights)
    elif weights is not None:
        f.append(f"weights returned without weights: {_meta(weights)}")
    if p.dtype == BF16:
        if layout.scales is not None:
            f.append(f"layout.scales is {_meta(layout.scales)} for bf16, want None")
    else:
        ok &= _check_tensor(f, "layout.scales", layout.scales, torch.float32, (R, G))
    # A contract violation in the structure would make the GEMM index out of
    # range on this rank only: it runs only on a well-formed result.
    gemm_ok = ok and not f
    if not gemm_ok:
        return f, False

    # The rows' contents, row by row against their source token.
    base = torch.tensor([0] + [inp.num_tokens for inp in inputs]).cumsum(0)
    src = base[ref.src[:, 0]] + ref.src[:, 1]

    def first_bad(bad):
        r = int(bad.nonzero()[0, 0])
        s, t = ref.src[r].tolist()
        return f"row {r} (source rank {s}, token {t})"

    got = output.cpu()
    if p.kind == "bf16":
        want = torch.cat([inp.x for inp in inputs])[src]
        bad = (got.view(torch.int16) != want.view(torch.int16)).any(dim=1)
    elif p.kind == "fp8_input":  # bytes and scales travel as they are
        want = torch.cat([inp.q for inp in inputs])[src]
        want_s = torch.cat([inp.scales for inp in inputs])[src]
        bad = (got.view(torch.uint8) != want).any(dim=1) | (layout.scales.cpu() != want_s).any(dim=1)
    else:  # quantized in the kernel, from values it reproduces exactly (make_input)
        want = torch.cat([inp.x for inp in inputs])[src].double()
        deq = got.double() * layout.scales.cpu().double().repeat_interleave(SCALE_GROUP, dim=1)
        bad = ~((deq - want).abs() <= 1e-5 * want.abs()).all(dim=1)
    if bool(bad.any()):
        f.append(f"{int(bad.sum())} of {R} rows differ from their source token ({p.kind}), first: {first_bad(bad)}")
    return f, True


# ---------------------------------------------------------------- the experts
def grouped_gemm(output, row_weights, layout, w_local):
    """The local experts on the rank-rows result, gathering rows by index: for
    expert e the rows expert_rows[off[e] : off[e] + count[e]], y = x[rows] @ W_e
    in fp32, added into a per-row fp32 sum with the expert's weight in that row
    (row_weights where row_experts == e; 1 without weights). -> bf16 [rows, H]."""
    x = output.float()
    if layout.scales is not None:  # fp8: dequantize with the per-128-column scales
        x = x * layout.scales.repeat_interleave(SCALE_GROUP, dim=1)
    acc = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    counts = layout.expert_counts.tolist()
    offsets = layout.expert_offsets.tolist()
    for e, n in enumerate(counts):
        if n == 0:
            continue
        rows = layout.expert_rows[offsets[e]:offsets[e] + n].long()
        y = x[rows] @ w_local[e]
        picked = layout.row_experts[rows] == e                      # [n, K]
        w = picked.float().sum(dim=1) if row_weights is None else (row_weights[rows] * picked).sum(dim=1)
        acc.index_add_(0, rows, w[:, None] * y)
    return acc.to(BF16)


def expert_output(p: Problem, rank: int, w_all, output, weights, layout, gemm_ok: bool):
    """What this rank hands to combine: the grouped GEMM's rows when the dispatch
    met the contract (else zeros: combine is collective and runs anyway). Rows
    without an expert here (own_rows_first: own rows of tokens with none here)
    are NaN: combine skips them, so they must not reach any token's output."""
    if not gemm_ok:
        return torch.zeros((output.shape[0], HIDDEN), dtype=BF16, device=output.device)
    L = p.local_experts
    y = grouped_gemm(output, weights, layout, w_all[rank * L:(rank + 1) * L])
    y[(layout.row_experts < 0).all(dim=1)] = float("nan")
    return y


def output_failures(p: Problem, mine: RankInput, w_all, out) -> list:
    """out[t] vs sum over the token's valid slots k of w[t, k] * (x_t @ W_{idx[t, k]}),
    computed here in float64 from this rank's own input.

    Tolerance, per element, with S = sum_k |w_k y_k| and M = sum_k |w_k| (|x| @ |W_e|):
     - the grouped GEMM in fp32: <= H 2^-24 M per expert row (any summation
       order; fp8: dequantizing in fp32 adds 2^-24 relative to x, and a scale the
       kernel computes within 1e-6 is covered too), and the fp32 weighted sum
       K 2^-24 S;
     - the bf16 rounding of each rank's row sum (unit roundoff 2^-8: <= 2^-8 of
       its share of S) and combine's fp32 sum across ranks rounded to bf16
       (<= 2^-8 S, plus W 2^-24 S):
    in all <= 2^-7 S + (H + K + W + 1) 2^-24 M; allowed 2^-6 S + H 2^-23 M
    (2x margin; the example's tolerance, examples/moe_layer.py, per element).
    A misrouted row, a lost expert or weight, or a row counted twice moves
    elements by O(S). Tokens without any expert must be exactly 0."""
    T, K, H = mine.num_tokens, p.topk, HIDDEN
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (T, H) or out.dtype != BF16:
        return [f"combine output is {_meta(out)}, want bfloat16[{T}, {H}]"]
    device = w_all.device
    v = mine.values().to(device)
    idx = mine.idx.to(device)
    w = (mine.weights if mine.weights is not None else torch.ones(T, K)).double().to(device)
    ref = torch.zeros(T, H, dtype=torch.float64, device=device)
    mag = torch.zeros_like(ref)
    gemm_mag = torch.zeros_like(ref)
    for e in range(p.num_experts):
        tok, slot = (idx == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        we = w_all[e].double()
        wy = w[tok, slot][:, None] * (v[tok] @ we)
        ref.index_add_(0, tok, wy)
        mag.index_add_(0, tok, wy.abs())
        gemm_mag.index_add_(0, tok, w[tok, slot].abs()[:, None] * (v[tok].abs() @ we.abs()))
    tol = 2.0 ** -6 * mag + H * 2.0 ** -23 * gemm_mag
    got = out.double()
    bad = ~((got - ref).abs() <= tol)
    f = []
    if bool(bad.any()):
        t, h = bad.nonzero()[0].tolist()
        f.append(f"combine: {int(bad.sum())} of {bad.numel()} elements outside tolerance, first [{t}, {h}]: "
                 f"{got[t, h].item()} vs {ref[t, h].item()} (tolerance {tol[t, h].item():.3e})")
    none = (idx < 0).all(dim=1)
    if bool(none.any()) and bool((got[none] != 0).any()):
        f.append("combine: a token without any expert is not exactly 0")
    return f


# ---------------------------------------------------------------- one round
def run_round(layer, p: Problem, env, w_all, out_given=False, keep=None):
    """One dispatch + grouped GEMM + combine on every rank; returns failures."""
    mine = make_input(p, env.rank)
    inputs = gather_inputs(mine)
    x, idx, w = mine.api_args(env.device, p.idx_dtype)
    args = (x if isinstance(x, tuple) else (x,)) + (idx,) + ((w,) if w is not None else ())
    before = [a.clone() for a in args]
    output, weights, layout = layer.dispatch(x, idx, w)
    failures, gemm_ok = dispatch_failures(p, inputs, env.rank, output, weights, layout)
    if any(not torch.equal(a.view(torch.uint8), b.view(torch.uint8)) for a, b in zip(args, before)):
        failures.append("dispatch modified its inputs")
    # Combine is collective: it runs even when the dispatch check failed.
    y = expert_output(p, env.rank, w_all, output, weights, layout, gemm_ok)
    out = torch.full((mine.num_tokens, HIDDEN), float("nan"), dtype=BF16, device=env.device) if out_given else None
    combined = layer.combine(y, layout, out=out)
    if keep is not None:
        keep["layout"], keep["y"] = layout, y
    if out is not None and combined is not out:
        failures.append("combine did not return `out`")
    if gemm_ok:
        failures += output_failures(p, mine, w_all, combined)
    return failures


def graph_replay_failures(env, step, tag: str, compare) -> list:
    """step(x, idx, w) (a dispatch and a combine of the rows as they came: no expert, so each token's output
    sums its rows, one per rank it reached) captured in one CUDA graph after a warm-up on a side stream, then
    replayed 3 times with fresh bf16 tokens and routing (with dropped experts) copied into the captured inputs.
    compare(out, want) -> None or a message, want = round_bf16(x * ranks reached) (+0.0 for none); returns the
    failures, per replay."""
    p0 = Problem(env.world, "bf16", True, "drops", "full", seed=stable_seed(tag, 0))
    x0, idx0, w0 = make_input(p0, env.rank).api_args(env.device, torch.int64)
    inputs = (x0.clone(), idx0.clone(), w0.clone())
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture (views, lazy kernel loading)
        step(*inputs)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    # thread_local: only this thread's unsafe calls (a host sync in the layer) break the capture.
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        out = step(*inputs)
    failures = []
    for replay in range(3):
        p = Problem(env.world, "bf16", True, "drops", "full", seed=stable_seed(tag, replay + 1))
        fresh = make_input(p, env.rank).api_args(env.device, torch.int64)
        for into, value in zip(inputs, fresh):
            into.copy_(value)
        graph.replay()
        torch.cuda.synchronize()
        x, idx = fresh[0], fresh[1]
        ranks = torch.where(idx >= 0, idx // p0.local_experts, torch.full_like(idx, -1))
        reached = torch.stack([(ranks == r).any(dim=1) for r in range(env.world)], dim=1).sum(dim=1)
        # + 0.0: a token that reached no rank sums to +0.0 (x * 0 is -0.0 where x < 0).
        want = (x.float() * reached[:, None].float() + 0.0).to(BF16)
        message = compare(out, want)
        if message is not None:
            failures.append(f"replay {replay}: {message}")
    del graph
    return failures
