"""Pure-PyTorch reference for the EpLayer tests (the Python twin of
tests/common/ep_reference.hpp): problem generation, the placement the dispatch
contract prescribes, the fp8 e4m3 quantization, a stand-in expert, and the
combine result with its tolerance.

Contract modelled here (docs/python.md, include/ferry/ep.hpp):
 - rank d owns experts [d * L, (d + 1) * L); the rows of local expert le are the
   (src_rank, src_token, k) with exp_indices == d * L + le, ordered by src_rank,
   then src_token (then k);
 - high_throughput: expert le starts at offsets[le], offsets[0] = 0,
   offsets[le + 1] = offsets[le] + round_up(count[le], expert_alignment);
   low_latency: expert le's slab starts at le * capacity, capacity = world * T;
 - combine: out[t] = sum over k with exp_indices[t, k] >= 0 of w[t, k] * y(t, k).
Everything here runs on CPU tensors except where a device is passed.
"""
import dataclasses

import torch

from _helpers import cpu_generator

SCALE_GROUP = 128   # columns per fp32 scale
FP8_MAX = 448.0     # largest finite e4m3 value
MIN_AMAX = 1e-4     # amax floor of the in-kernel quantization
BF16, FP8 = torch.bfloat16, torch.float8_e4m3fn
KINDS = ("bf16", "fp8", "fp8_input")  # layer dtype bf16; fp8 from bf16 input; fp8 with (q, scales) input


@dataclasses.dataclass(frozen=True)
class Problem:
    world: int
    max_tokens: int
    hidden: int
    topk: int
    num_experts: int
    kind: str = "bf16"
    with_weights: bool = True
    routing: str = "uniform"    # uniform | drops | skewed | none
    idx_dtype: torch.dtype = torch.int64
    counts: str = "varied"      # varied | full | some_zero | only_rank0 | all_zero
    seed: int = 0

    @property
    def local_experts(self):
        return self.num_experts // self.world

    @property
    def capacity(self):
        return self.world * self.max_tokens

    @property
    def groups(self):
        return self.hidden // SCALE_GROUP

    @property
    def dtype(self):
        return BF16 if self.kind == "bf16" else FP8

    @property
    def hot_rank(self):
        return self.seed % self.world


@dataclasses.dataclass
class RankInput:
    num_tokens: int
    idx: torch.Tensor                 # [T, K] int64, -1 = no expert
    weights: torch.Tensor = None      # [T, K] float32, or None
    x: torch.Tensor = None            # [T, H] bf16 (bf16 input)
    q: torch.Tensor = None            # [T, H] fp8 e4m3 bytes as uint8 (fp8 input; fp8 tensors do not pickle)
    scales: torch.Tensor = None       # [T, H / 128] float32 (fp8 input)

    def values(self) -> torch.Tensor:
        """float32 [T, H]: the bf16 values, or q * scale for fp8 input."""
        if self.x is not None:
            return self.x.float()
        return self.q.view(FP8).float() * self.scales.repeat_interleave(SCALE_GROUP, dim=1)

    def api_args(self, device, idx_dtype):
        """(input, exp_indices, weight) as EpLayer.dispatch takes them."""
        inp = self.x.to(device) if self.x is not None else (self.q.view(FP8).to(device), self.scales.to(device))
        w = self.weights.to(device) if self.weights is not None else None
        return inp, self.idx.to(idx_dtype).to(device), w


def expert_factor(e: torch.Tensor) -> torch.Tensor:
    """The stand-in expert of global id e multiplies by this (float32): rows
    landing at the wrong expert change the combine result."""
    return 1.0 + 0.0625 * (e % 13).to(torch.float32)


def tokens_on_rank(p: Problem, rank: int) -> int:
    varied = 1 + int(torch.randint(p.max_tokens, (1,), generator=cpu_generator("ep-count", p.seed, rank)))
    return {"full": p.max_tokens, "varied": varied, "some_zero": 0 if rank % 2 else varied,
            "only_rank0": p.max_tokens if rank == 0 else 0, "all_zero": 0}[p.counts]


def make_input(p: Problem, rank: int) -> RankInput:
    T, K, E, L, H, G = p.max_tokens, p.topk, p.num_experts, p.local_experts, p.hidden, p.groups
    T = tokens_on_rank(p, rank)
    g = cpu_generator("ep-input", p, rank)
    if p.routing == "none":
        idx = torch.full((T, K), -1, dtype=torch.int64)
    else:
        scores = torch.rand(T, E, generator=g)
        if p.routing == "skewed":  # 85% of the tokens prefer the hot rank's experts
            boost = torch.rand(T, generator=g) < 0.85
            scores[boost, p.hot_rank * L:(p.hot_rank + 1) * L] += 1
        idx = scores.argsort(dim=1, descending=True)[:, :K]          # K distinct experts
        idx = idx.gather(1, torch.rand(T, K, generator=g).argsort(dim=1))  # in random slots
        if p.routing == "drops":  # some slots, and some whole tokens, without an expert
            idx[torch.rand(T, K, generator=g) < 0.2] = -1
            idx[torch.rand(T, generator=g) < 1 / 16] = -1
    inp = RankInput(T, idx.contiguous())
    if p.with_weights:
        inp.weights = 0.05 + 0.95 * torch.rand(T, K, generator=g)
    if p.kind == "fp8_input":
        b = torch.randint(0, 256, (T, H), generator=g, dtype=torch.int32).to(torch.uint8)
        b[(b & 0x7F) == 0x7F] -= 1  # S.1111.111 is NaN: use S.1111.110 (+-448) instead
        inp.q = b
        exps = torch.randint(0, 6, (T, G), generator=g).double()
        inp.scales = ((1 + torch.rand(T, G, generator=g, dtype=torch.float64)) * 2.0 ** (-8 - exps)).float()
    else:
        # Per 128-column group a magnitude 2^e, e in [-6, 3], with some all-zero
        # groups and some below the 1e-4 amax floor (fp8 scale edge cases).
        sel = torch.randint(0, 16, (T, G), generator=g)
        mag = 2.0 ** (torch.randint(0, 10, (T, G), generator=g).double() - 6)
        mag = torch.where(sel == 0, 0.0, torch.where(sel == 1, 2.0 ** -17, mag))
        u = 2 * torch.rand(T, H, generator=g, dtype=torch.float64) - 1
        inp.x = (mag.repeat_interleave(SCALE_GROUP, dim=1) * u).to(BF16)
    return inp


# ---------------------------------------------------------------- placement
@dataclasses.dataclass
class Layout:
    entries: torch.Tensor   # [N, 4] int64 (local expert, src_rank, src_token, k), in row order
    rows: torch.Tensor      # [N] int64: row of each entry in the flattened dispatch output
    counts: list
    offsets: list


def reference_layout(p: Problem, inputs, dest: int, alignment: int, low_latency: bool) -> Layout:
    L, K = p.local_experts, p.topk
    lo = dest * L
    parts = []
    for sr, inp in enumerate(inputs):
        T = inp.num_tokens
        t = torch.arange(T).unsqueeze(1).expand(T, K)
        k = torch.arange(K).unsqueeze(0).expand(T, K)
        m = (inp.idx >= lo) & (inp.idx < lo + L)
        parts.append(torch.stack([inp.idx[m] - lo, torch.full_like(t[m], sr), t[m], k[m]], dim=1))
    e = torch.cat(parts) if parts else torch.zeros(0, 4, dtype=torch.int64)
    key = ((e[:, 0] * p.world + e[:, 1]) * p.max_tokens + e[:, 2]) * K + e[:, 3]
    e = e[key.argsort()]
    counts = torch.bincount(e[:, 0], minlength=L)
    if low_latency:
        offsets = [le * p.capacity for le in range(L + 1)]
    else:
        offsets = [0]
        for c in counts.tolist():
            offsets.append(offsets[-1] + (c + alignment - 1) // alignment * alignment)
    first = torch.cumsum(counts, 0) - counts  # first entry of each expert
    pos = torch.arange(e.shape[0]) - first[e[:, 0]]
    rows = torch.tensor(offsets[:-1], dtype=torch.int64)[e[:, 0]] + pos
    return Layout(e, rows, counts.tolist(), offsets)


def take_rows(t: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Rows `rows` of t viewed as [-1, last dim] (fp8 gathered as bytes: not
    every index kernel takes float8)."""
    flat = t.reshape(-1, t.shape[-1])
    return flat.view(torch.uint8)[rows].view(FP8) if t.dtype == FP8 else flat[rows]


def _describe(entry):
    le, sr, t, k = entry.tolist()
    return f"local expert {le}, rank {sr} token {t} slot {k}"


def dispatch_failures(p: Problem, inputs, me: int, mode: str, alignment: int, output, weights, layout):
    """Checks one dispatch's result against the reference. Returns (failures,
    reference Layout, whether the rows could be compared)."""
    low = mode == "low_latency"
    ref = reference_layout(p, inputs, me, alignment, low)
    L, H, G = p.local_experts, p.hidden, p.groups
    f = []
    counts = layout.expert_counts
    if counts.dtype != torch.int32 or tuple(counts.shape) != (L,) or not counts.is_cuda:
        f.append(f"expert_counts is {counts.dtype}{list(counts.shape)} on {counts.device}, want CUDA int32[{L}]")
    elif counts.cpu().tolist() != ref.counts:
        f.append(f"expert_counts {counts.cpu().tolist()}, want {ref.counts}")
    offs = layout.expert_offsets
    if offs.dtype != torch.int64 or tuple(offs.shape) != (L + 1,) or not offs.is_cuda:
        f.append(f"expert_offsets is {offs.dtype}{list(offs.shape)} on {offs.device}, want CUDA int64[{L + 1}]")
    elif offs.cpu().tolist() != ref.offsets:
        f.append(f"expert_offsets {offs.cpu().tolist()}, want {ref.offsets}")
    if layout.num_tokens != inputs[me].num_tokens:
        f.append(f"layout.num_tokens {layout.num_tokens}, want {inputs[me].num_tokens}")
    rows_total = L * p.capacity if low else ref.offsets[-1]
    if low:
        want_shape, want_wshape = (L, p.capacity, H), (L, p.capacity)
        if layout.host_expert_counts is not None or layout.num_rows != -1:
            f.append(f"low_latency: host_expert_counts {layout.host_expert_counts}, num_rows {layout.num_rows}; "
                     f"want None and -1")
    else:
        want_shape, want_wshape = (ref.offsets[-1], H), (ref.offsets[-1],)
        if list(layout.host_expert_counts or []) != ref.counts or layout.host_expert_counts is None:
            f.append(f"host_expert_counts {layout.host_expert_counts}, want {ref.counts}")
        if layout.num_rows != ref.offsets[-1]:
            f.append(f"num_rows {layout.num_rows}, want {ref.offsets[-1]}")
    if tuple(output.shape) != want_shape or output.dtype != p.dtype:
        f.append(f"output is {output.dtype}{list(output.shape)}, want {p.dtype}{list(want_shape)}")
    if (weights is None) == p.with_weights:
        f.append(f"weights {'missing' if weights is None else 'returned'} with with_weights={p.with_weights}")
    elif weights is not None and (tuple(weights.shape) != want_wshape or weights.dtype != torch.float32):
        f.append(f"weights is {weights.dtype}{list(weights.shape)}, want float32{list(want_wshape)}")
    if (layout.scales is None) != (p.dtype == BF16):
        f.append(f"layout.scales is {'None' if layout.scales is None else 'set'} for dtype {p.dtype}")
    elif layout.scales is not None and (layout.scales.dtype != torch.float32
                                        or layout.scales.numel() != rows_total * G):
        f.append(f"layout.scales is {layout.scales.dtype}{list(layout.scales.shape)}, want float32 [{rows_total}, {G}]")
    if f:
        return f, ref, False

    # The rows, their weights (and scales), entry by entry.
    base = torch.tensor([0] + [inp.num_tokens for inp in inputs]).cumsum(0)
    src = base[ref.entries[:, 1]] + ref.entries[:, 2]
    rows_dev = ref.rows.to(output.device)
    got = take_rows(output, rows_dev).cpu()
    first_bad = lambda bad: _describe(ref.entries[bad.nonzero()[0, 0]])  # noqa: E731
    if p.kind == "bf16":
        want = torch.cat([inp.x for inp in inputs])[src]
        bad = (got.view(torch.int16) != want.view(torch.int16)).any(dim=1)
        if bool(bad.any()):
            f.append(f"{int(bad.sum())} of {len(bad)} rows differ from the source tokens, first: {first_bad(bad)}")
    else:
        got_s = layout.scales.reshape(-1, G)[rows_dev].cpu()
        if p.kind == "fp8_input":  # bytes and scales travel as they are
            want = torch.cat([inp.q for inp in inputs])[src]
            want_s = torch.cat([inp.scales for inp in inputs])[src]
            bad = (got.view(torch.uint8) != want.view(torch.uint8)).any(dim=1) | (got_s != want_s).any(dim=1)
            if bool(bad.any()):
                f.append(f"{int(bad.sum())} of {len(bad)} fp8 rows or scales differ, first: {first_bad(bad)}")
        else:  # bf16 input quantized in the kernel: scale = max(amax, 1e-4) / 448 per group
            x = torch.cat([inp.x for inp in inputs])[src].double()
            want_s = x.abs().reshape(-1, G, SCALE_GROUP).amax(dim=2).clamp(min=MIN_AMAX) / FP8_MAX
            bad_s = ~((got_s.double() - want_s).abs() <= 1e-6 * want_s)
            if bool(bad_s.any()):
                f.append(f"{int(bad_s.any(1).sum())} rows with a scale != max(amax, 1e-4)/448, first: "
                         f"{first_bad(bad_s.any(1))}")
            # Round to nearest e4m3: within half an ulp (2^-4 relative for
            # normals, 2^-10 * scale for subnormals; 2^-9 and 1e-5 cover x / scale
            # itself being rounded in fp32 first).
            s = got_s.double().repeat_interleave(SCALE_GROUP, dim=1)
            err = (got.double() * s - x).abs()
            bad = ~(err <= 0.0625 * (1 + 1e-5) * x.abs() + 2.0 ** -9 * s)
            if bool(bad.any()):
                f.append(f"{int(bad.any(1).sum())} rows not a round-to-nearest fp8 quantization of the source, "
                         f"first: {first_bad(bad.any(1))}")
    if weights is not None:
        got_w = weights.reshape(-1)[rows_dev].cpu()
        want_w = torch.cat([inp.weights for inp in inputs])[src, ref.entries[:, 3]]
        bad = got_w != want_w
        if bool(bad.any()):
            f.append(f"{int(bad.sum())} row weights differ, first: {first_bad(bad)}")
    return f, ref, True


def stand_in_outputs(p: Problem, me: int, output, scales, ref: Layout):
    """expert_output for combine: row r of global expert e gets
    bf16(value(r) * expert_factor(e)); every other row (alignment padding, the
    tail of a low-latency slab) is NaN, which combine must never read."""
    H, G = p.hidden, p.groups
    y = torch.full(output.shape, float("nan"), dtype=BF16, device=output.device)
    rows = ref.rows.to(output.device)
    vals = take_rows(output, rows).float()
    if p.dtype == FP8:
        vals = vals * scales.reshape(-1, G)[rows].repeat_interleave(SCALE_GROUP, dim=1)
    factor = expert_factor(me * p.local_experts + ref.entries[:, 0]).to(output.device)
    y.view(-1, H)[rows] = (vals * factor[:, None]).to(BF16)
    return y


def combine_failures(p: Problem, mine: RankInput, out) -> list:
    """out[t] vs sum_k w y, y the stand-in's output for the token's value.

    Tolerance: combine accumulates in fp32 but rounds each destination rank's
    partial sum to bf16 before it crosses back, then the final sum: two
    roundings, each of <= 2^-8 (bf16 keeps 8 significant bits) of at most
    S = sum_k |w_k y_k|, plus 2^-10 S for the fp32 accumulation (~K 2^-24 S)
    and the order of the sums (tests/common/ep_reference.hpp, combine_reference).
    fp8 quantized in the kernel: the reference uses the unquantized value, so
    add each term's quantization bound |w| f (2^-4 |x| + 2^-9 scale), and the
    stand-in's own bf16 rounding (2^-8 S). 1e-6 absolute only for S ~ 0.
    Tokens without any expert must be exactly 0."""
    T, K, H = mine.num_tokens, p.topk, p.hidden
    f = []
    if tuple(out.shape) != (T, H) or out.dtype != BF16:
        return [f"combine output is {out.dtype}{list(out.shape)}, want bfloat16[{T}, {H}]"]
    v = mine.values()
    w = mine.weights if mine.weights is not None else torch.ones(T, K)
    ref = torch.zeros(T, H, dtype=torch.float64)
    mag = torch.zeros_like(ref)
    qerr = torch.zeros_like(ref)
    quantized = p.kind == "fp8"
    if quantized:
        x = v.double()
        scale = (x.abs().reshape(T, p.groups, SCALE_GROUP).amax(2).clamp(min=MIN_AMAX) / FP8_MAX)
        scale = scale.float().double().repeat_interleave(SCALE_GROUP, dim=1)
    for k in range(K):
        e = mine.idx[:, k]
        fac = expert_factor(e.clamp(min=0))[:, None]
        y = (v.double() * fac.double()) if quantized else (v * fac).to(BF16).double()
        wk = torch.where(e >= 0, w[:, k].double(), 0.0)[:, None]
        ref += wk * y
        mag += (wk * y).abs()
        if quantized:
            qerr += wk.abs() * fac.double() * (0.0625 * (1 + 1e-5) * x.abs() + 2.0 ** -9 * scale)
    roundings = 3 if quantized else 2
    tol = (roundings * 2.0 ** -8 + 2.0 ** -10) * mag + qerr + 1e-6
    got = out.cpu().double()
    bad = ~((got - ref).abs() <= tol)
    if bool(bad.any()):
        t, h = bad.nonzero()[0].tolist()
        f.append(f"combine: {int(bad.sum())} of {bad.numel()} elements outside tolerance, first [{t}, {h}]: "
                 f"{got[t, h].item()} vs {ref[t, h].item()} (tolerance {tol[t, h].item():.3e})")
    none = (mine.idx < 0).all(dim=1)
    if bool(none.any()) and bool((got[none] != 0).any()):
        f.append("combine: a token without any expert is not exactly 0")
    return f
