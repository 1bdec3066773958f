#!/usr/bin/env python3
"""A small Mixture-of-Experts layer run with expert parallelism through ferry.

    torchrun --nproc-per-node N examples/moe_layer.py [--tokens 256] [--hidden 1024]
        [--ffn 2048] [--experts 32] [--topk 4] [--mode high_throughput|low_latency] [--seed 0]

The layer: a router (Linear hidden -> experts, softmax, top-k, the k weights
renormalized to sum to 1) and per expert a 2-layer MLP, y = W2 silu(W1 x), with
bf16 weights and activations. Every rank builds the same weights from --seed
(so every rank could compute any expert) and has its own random tokens.

On every rank this program:
  1. routes its tokens (the same routing feeds both paths below);
  2. expert parallel: ferry dispatches each token to the ranks that own its
     experts (rank r owns experts [r * E/N, (r + 1) * E/N)), each rank runs only
     its local experts' MLPs on the rows it received, and ferry combines the
     weighted outputs back in token order;
  3. reference: the same layer on this GPU alone, every expert computed here;
  4. prints its max abs error against the reference; rank 0 prints PASS or FAIL.
Exits non-zero on FAIL. The functions below are importable (tests/python uses
them); main() is the torchrun entry point.
"""
import os

# Never create NVLink multicast objects (NCCL NVLS, torch symmetric memory,
# NVSHMEM): set before anything initializes NCCL or CUDA.
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import ferry  # noqa: E402

MODES = ("high_throughput", "low_latency")


@dataclasses.dataclass
class Moe:
    router: torch.Tensor  # [E, H] bf16
    w1: torch.Tensor      # [E, F, H] bf16: up projection
    w2: torch.Tensor      # [E, H, F] bf16: down projection
    topk: int

    @property
    def num_experts(self) -> int:
        return self.w1.shape[0]

    @property
    def hidden(self) -> int:
        return self.w1.shape[2]


def build_moe(hidden: int, ffn: int, experts: int, topk: int, seed: int, device) -> Moe:
    """The layer's weights, identical on every rank for the same seed (drawn on
    the CPU, so they do not depend on the GPU). Scaled so activations stay O(1)."""
    if not 1 <= topk <= experts:
        raise ValueError(f"topk must be in [1, experts={experts}], got {topk}")
    gen = torch.Generator().manual_seed(seed)
    router = (torch.randn(experts, hidden, generator=gen) / math.sqrt(hidden)).to(torch.bfloat16)
    w1 = torch.empty(experts, ffn, hidden, dtype=torch.bfloat16, device=device)
    w2 = torch.empty(experts, hidden, ffn, dtype=torch.bfloat16, device=device)
    for e in range(experts):  # one expert at a time: small host temporaries
        w1[e].copy_((torch.randn(ffn, hidden, generator=gen) / math.sqrt(hidden)).to(torch.bfloat16))
        w2[e].copy_((torch.randn(hidden, ffn, generator=gen) / math.sqrt(ffn)).to(torch.bfloat16))
    return Moe(router.to(device), w1, w2, topk)


def make_tokens(num_tokens: int, hidden: int, seed: int, rank: int, device) -> torch.Tensor:
    """This rank's own tokens [T, H] bf16 (differ per rank, reproducible)."""
    gen = torch.Generator().manual_seed(seed * 1_000_003 + 7919 * (rank + 1))
    return torch.randn(num_tokens, hidden, generator=gen).to(torch.bfloat16).to(device)


def route(moe: Moe, x: torch.Tensor):
    """Top-k routing: (exp_indices [T, K] int64, weights [T, K] float32, summing to 1)."""
    logits = x.float() @ moe.router.float().t()
    probs = torch.softmax(logits, dim=-1)
    top_w, top_i = probs.topk(moe.topk, dim=-1)
    return top_i, (top_w / top_w.sum(dim=-1, keepdim=True)).contiguous()


def expert_mlp(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    """y = W2 silu(W1 x) for rows x [..., n, H] (or a batch of experts: x [L, n, H]
    with w1 [L, F, H], w2 [L, H, F]). bf16 in and out, computed in fp32 with a
    single bf16 rounding at the end, so that the same row gives the same output
    (up to one bf16 ulp, see TOLERANCE below) whatever batch it is computed in.
    (bf16 GEMMs would round the hidden activation too, and a one-ulp difference
    there is amplified by W2 beyond any tight bound.)"""
    h = F.silu(x.float() @ w1.float().transpose(-1, -2))
    return (h @ w2.float().transpose(-1, -2)).to(torch.bfloat16)


def moe_forward_reference(moe: Moe, x: torch.Tensor, exp_indices: torch.Tensor, weights: torch.Tensor):
    """The layer on this GPU alone. Returns (out [T, H] fp32, mag [T, H] fp32):
    out[t] = sum_k w[t, k] * expert_mlp_{e[t, k]}(x[t]) with bf16 expert outputs
    and fp32 accumulation; mag[t] = sum_k |w[t, k] * y_k| (for the tolerance)."""
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    mag = torch.zeros_like(out)
    for e in range(moe.num_experts):
        tok, slot = (exp_indices == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        y = expert_mlp(x[tok], moe.w1[e], moe.w2[e]).float()
        wy = weights[tok, slot].unsqueeze(1) * y
        out.index_add_(0, tok, wy)
        mag.index_add_(0, tok, wy.abs())
    return out, mag


def moe_forward_ep(layer, moe: Moe, x: torch.Tensor, exp_indices: torch.Tensor, weights: torch.Tensor,
                   rank: int) -> torch.Tensor:
    """The layer with expert parallelism: dispatch, this rank's experts, combine.
    Returns [T, H] bf16. Only experts [rank * L, (rank + 1) * L) are used here."""
    L = layer.local_experts
    w1 = moe.w1[rank * L:(rank + 1) * L]
    w2 = moe.w2[rank * L:(rank + 1) * L]
    received, _, layout = layer.dispatch(x, exp_indices, weights)
    if layout.host_expert_counts is not None:
        # high_throughput: received is [num_rows, H]; expert e's rows are
        # received[offsets[e] : offsets[e] + counts[e]] (any alignment padding
        # between blocks is never read by combine, so it stays uninitialized).
        y = torch.empty_like(received)
        offsets = layout.expert_offsets.tolist()  # the dispatch already synchronized once
        for e, n in enumerate(layout.host_expert_counts):
            if n:
                rows = slice(offsets[e], offsets[e] + n)
                y[rows] = expert_mlp(received[rows], w1[e], w2[e])
    else:
        # low_latency: received is [L, capacity, H], expert e's valid rows are the
        # first counts[e] of slab e. Counts live on the device (no host sync), so
        # run every expert over its whole slab in one batched matmul; rows past
        # the count hold stale data whose outputs combine never reads.
        y = expert_mlp(received, w1, w2)
    return layer.combine(y, layout)


# TOLERANCE. Per output element, with S = sum_k |w_k y_k| (mag above):
#  - the expert outputs: the EP path computes each row in a different batch than
#    the reference, so its fp32 sums may differ in the last fp32 bits and round to
#    the neighbouring bf16 value: at most one bf16 ulp, <= 2^-7 |y_k|, so
#    <= 2^-7 S in all;
#  - combine rounds each destination rank's partial sum to bf16 before it crosses
#    back, then the final sum: two roundings of <= 2^-9 of a value <= S;
#  - fp32 accumulation-order differences (~2^-24 per term): negligible here.
# Total <= (2^-7 + 2^-8) S = 0.75 * 2^-6 S. We take atol = 2^-6 * max(S) over
# this rank's output: the bound above for every element, plus 2^-8 * max(S)
# slack for the fp32 sums whose result cancels to ~0 (where "one ulp of y" is
# not the right scale). A misrouted row, a lost expert or a wrong weight changes
# elements by O(S), orders of magnitude more than this.
TOLERANCE_FRACTION = 2.0 ** -6


@dataclasses.dataclass
class CheckResult:
    rank: int
    max_err: float    # max |ep - reference| on this rank
    atol: float       # this rank's tolerance
    max_ref: float    # max |reference| on this rank
    ok: bool          # this rank within tolerance (and no NaN/Inf)
    all_ok: bool      # every rank within tolerance


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=256, help="tokens per rank (also the layer's max_tokens)")
    p.add_argument("--hidden", type=int, default=1024, help="model width (multiple of 128)")
    p.add_argument("--ffn", type=int, default=2048, help="expert MLP inner width")
    p.add_argument("--experts", type=int, default=32, help="experts in all (divisible by the world size)")
    p.add_argument("--topk", type=int, default=4, help="experts per token")
    p.add_argument("--mode", choices=MODES, default="high_throughput")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def run_check(args: argparse.Namespace, group=None) -> CheckResult:
    """One forward pass through ferry and through the reference, compared.
    Collective over `group` (default: the world); torch.distributed must be
    initialized and the current CUDA device set."""
    group = group if group is not None else dist.group.WORLD
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    if args.experts % world != 0:
        raise ValueError(f"--experts ({args.experts}) must be divisible by the number of ranks ({world}): "
                         f"each rank owns experts/world of them")
    if args.mode not in MODES:
        raise ValueError(f"--mode must be one of {MODES}, got {args.mode!r}")
    if torch.backends.cuda.matmul.allow_tf32:
        raise RuntimeError("TF32 matmuls are on; the tolerance assumes fp32 expert math (turn TF32 off)")
    device = torch.device("cuda", torch.cuda.current_device())

    moe = build_moe(args.hidden, args.ffn, args.experts, args.topk, args.seed, device)
    x = make_tokens(args.tokens, args.hidden, args.seed, rank, device)
    exp_indices, weights = route(moe, x)

    layer = ferry.EpLayer(group, args.tokens, args.hidden, args.topk, args.experts,
                          dtype=torch.bfloat16, mode=args.mode)
    out = moe_forward_ep(layer, moe, x, exp_indices, weights, rank)
    torch.cuda.current_stream().synchronize()
    layer.finalize()

    ref, mag = moe_forward_reference(moe, x, exp_indices, weights)
    diff = (out.float() - ref).abs()
    max_err = diff.max().item() if diff.numel() else 0.0
    atol = TOLERANCE_FRACTION * (mag.max().item() if mag.numel() else 0.0)
    ok = bool(torch.isfinite(out).all().item()) and max_err <= atol
    # gloo (ranks sharing a GPU) reduces host tensors only.
    flag_device = device if dist.get_backend(group) == "nccl" else torch.device("cpu")
    flag = torch.tensor([0 if ok else 1], dtype=torch.int32, device=flag_device)
    dist.all_reduce(flag, group=group)
    return CheckResult(rank, max_err, atol, ref.abs().max().item() if ref.numel() else 0.0, ok, flag.item() == 0)


def main(argv=None) -> int:
    args = parse_args(argv)
    if "LOCAL_RANK" not in os.environ:
        print("moe_layer.py: run under torchrun, e.g. torchrun --nproc-per-node 2 examples/moe_layer.py",
              file=sys.stderr)
        return 2
    local_rank = int(os.environ["LOCAL_RANK"])
    # FERRY_TEST_SHARE_GPUS=1: more ranks than GPUs, ranks share them (NCCL refuses
    # two ranks on one GPU: gloo then; ferry moves the data either way). With
    # FERRY_RANKS_PER_NODE=1 every rank is its own virtual node (EP through UCX).
    share = os.environ.get("FERRY_TEST_SHARE_GPUS") == "1"
    device_index = local_rank % torch.cuda.device_count() if share else local_rank
    torch.cuda.set_device(device_index)
    if share:
        dist.init_process_group("gloo")
    else:
        dist.init_process_group("nccl", device_id=torch.device("cuda", device_index))
    try:
        r = run_check(args)
        print(f"rank {r.rank}: {args.mode} T={args.tokens} H={args.hidden} F={args.ffn} E={args.experts} "
              f"K={args.topk}: max abs error {r.max_err:.3e} (tolerance {r.atol:.3e}, max |ref| {r.max_ref:.3e})"
              f"{'' if r.ok else '  <-- FAIL'}", flush=True)
        dist.barrier()
        if r.rank == 0:
            print(f"{'PASS' if r.all_ok else 'FAIL'}: MoE layer with ferry EP ({args.mode}, "
                  f"{dist.get_world_size()} ranks) vs single-GPU reference", flush=True)
        return 0 if r.all_ok else 1
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
