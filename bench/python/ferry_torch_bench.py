#!/usr/bin/env python3
"""ferry from PyTorch against PyTorch's own collectives, in one torchrun job.

    PYTHONPATH=build/python torchrun --nproc-per-node 8 bench/python/ferry_torch_bench.py \\
        [--what allreduce,ep] [--out DIR] [--sizes 8K:256M:2] [--dtype bf16] [--iters 50 --warmup 10] \\
        [--ep-mode both] [--fp8] [--tokens N | --ht-tokens 4096 --ll-tokens 128] [--hidden 7168 --topk 8 \\
        --experts 256] [--eager]
    python3 bench/python/ferry_torch_bench.py --selftest-plot [--out DIR]   # table/CSV/PNG from made-up numbers

AllReduce (--dtype, default bf16; sizes 8K..256M in powers of 2 unless --sizes):
  ferry AllReduce.allreduce(x, out=y) | torch.distributed.all_reduce (NCCL, in place) |
  symmetric memory one-shot (torch.ops.symm_mem.one_shot_all_reduce_out) and two-shot
  (torch.ops.symm_mem.two_shot_all_reduce_, in place). The symm-mem inputs already sit in the
  symmetric buffer (symm_mem.empty + rendezvous), so they skip the copy-in ferry and NCCL do
  not need either. A baseline that fails (dtype, world size, ...) shows n/a with the reason.
  Before timing each size, ferry's result is compared with NCCL's, bit for bit (random small
  integers: every partial sum is exact), output poisoned with NaN first.
  Timing: G ops (16M / size, 1..10) captured into one CUDA graph (torch.cuda.graph), warm-up
  replays, then --iters replays between CUDA events; us per op = median replay / G, max over
  ranks; busbw = bytes / t * 2(n-1)/n. Capture failure: eager launches, marked '*'.
EP (DeepEP's reference problems: ht 4096 tokens/rank, ll 128; hidden 7168, top-8 of 256 experts,
  uniform random routing, topk distinct experts per token; experts rounded down to a multiple of
  the world size):
  ferry EpLayer dispatch + combine (bf16; fp8 dispatch with --fp8: ht dispatches tokens quantized
  beforehand, ll quantizes bf16 tokens in the kernel) against torch.distributed.all_to_all_single
  moving the same bytes: one copy of a token per destination rank it routes to (uneven splits
  from the routing, counts all-gathered once, outside the timing: the baseline is spared the
  count exchange a real MoE layer needs), and the same tokens back in bf16 for combine.
  Timing: iterations of (dispatch, combine), an event after each op, median over iterations,
  max over ranks. ll: 10 iterations per CUDA graph. ht: launched eagerly (its dispatch waits on
  the stream once to learn the row counts, so it cannot be captured), and the all_to_all_single
  it is compared with is launched eagerly too. GB/s: token payload the busiest rank receives,
  its own tokens included, / t (DeepEP; fp8 token = hidden + hidden/128*4 bytes). Before timing,
  ferry's bf16 result is checked: row count per rank, and combine of the dispatched rows ==
  x * sum of the token's weights (bf16 tolerance).
Output (rank 0): DIR/torch_bench.csv, DIR/torch_bench.png, then the tables, printed last. Exit
status 1 if a ferry check failed or a ferry case could not run.
NVLink multicast stays off: NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and
NVSHMEM_DISABLE_NVLS=1 are set below, before torch is imported.
"""

import os

os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"

import argparse  # noqa: E402
import inspect  # noqa: E402
import sys  # noqa: E402

import _bench_util as util  # noqa: E402

DTYPE_NAMES = ("bf16", "fp16", "fp32")
SCALE_BLOCK = 128


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--what", default="allreduce,ep", help="allreduce, ep or both (comma list)")
    p.add_argument("--out", default="torch_bench_out", help="directory of torch_bench.csv and torch_bench.png")
    p.add_argument("--sizes", default="8K:256M:2", type=util.parse_sizes,
                   help="allreduce sizes: list of sizes or LO:HI[:FACTOR] ranges, e.g. 8K:256M:4,1G")
    p.add_argument("--dtype", default="bf16", choices=DTYPE_NAMES, help="allreduce dtype")
    p.add_argument("--iters", type=int, default=50, help="timed graph replays (allreduce), iterations (EP)")
    p.add_argument("--warmup", type=int, default=10, help="warm-up replays (allreduce), iterations (EP)")
    p.add_argument("--graph-ops", type=int, default=0, help="allreduce ops per graph (0: 16M/size, 1..10)")
    p.add_argument("--graph-iters", type=int, default=10, help="EP (dispatch, combine) iterations per graph")
    p.add_argument("--eager", action="store_true", help="no CUDA graphs anywhere")
    p.add_argument("--ep-mode", default="both", choices=("both", "ht", "ll", "high_throughput", "low_latency"))
    p.add_argument("--ep-layout", default="both", choices=("both", "expanded", "rank_rows"),
                   help="high-throughput EP output: one row per (token, local expert), per (token, source rank) "
                        "(mode 'ht_rows' in the table), or both")
    p.add_argument("--fp8", action="store_true", help="also time fp8 dispatch")
    p.add_argument("--tokens", type=int, default=0, help="tokens per rank for both EP modes")
    p.add_argument("--ht-tokens", type=int, default=4096)
    p.add_argument("--ll-tokens", type=int, default=128)
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--topk", type=int, default=8)
    p.add_argument("--experts", type=int, default=256)
    p.add_argument("--ht-sms", type=int, default=24, help="SMs for high-throughput EP kernels (0: all)")
    p.add_argument("--ll-sms", type=int, default=0, help="SMs for low-latency EP kernels (0: all)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--selftest-plot", action="store_true",
                   help="render the table, CSV and PNG from synthetic numbers (no GPU, no torch.distributed)")
    args = p.parse_args(argv)
    args.what = [w.strip() for w in args.what.split(",") if w.strip()]
    bad = [w for w in args.what if w not in ("allreduce", "ep")]
    if bad or not args.what:
        p.error(f"--what takes allreduce and/or ep, got {bad or 'nothing'}")
    args.ep_mode = {"high_throughput": "ht", "low_latency": "ll"}.get(args.ep_mode, args.ep_mode)
    if args.tokens:
        args.ht_tokens = args.ll_tokens = args.tokens
    if args.hidden % SCALE_BLOCK or args.iters < 1 or args.warmup < 0 or args.graph_iters < 1:
        p.error("--hidden must be a multiple of 128, --iters and --graph-iters >= 1, --warmup >= 0")
    return args


class Bench:
    """State of one run: the process group, ferry's communicator, the results."""

    def __init__(self, args, torch, dist, ferry):
        self.args, self.torch, self.dist, self.ferry = args, torch, dist, ferry
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.comm = ferry.init()
        self.records, self.failures = [], []

    def log(self, text):
        if self.rank == 0:
            print(text, flush=True)

    def fail(self, text):
        self.failures.append("check: " + text)
        self.log("!" * 72 + f"\nCHECK FAILED: {text}\n" + "!" * 72)

    def try_all(self, fn):
        """Runs fn() on every rank; the first failing rank's error (or None), agreed by all."""
        error = None
        try:
            fn()
            self.torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - reported as n/a, the run goes on
            error = util.short_error(exc)
        return util.agree_error(error)

    def gather_mismatch(self, bad, detail):
        """All ranks' (mismatch count, first mismatch) -> text for the failing ranks, or ''."""
        got = [None] * self.world
        self.dist.all_gather_object(got, (int(bad), detail))
        return "; ".join(f"rank {r}: {n} wrong, {d}" for r, (n, d) in enumerate(got) if n)

    # ------------------------------------------------------------------ allreduce
    def run_allreduce(self):
        torch, dist, args = self.torch, self.dist, self.args
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
        elem = torch.tensor([], dtype=dtype).element_size()
        sizes = [s for s in args.sizes if s % elem == 0 and s >= elem]
        if len(sizes) < len(args.sizes):
            self.log(f"note: sizes that are not a whole number of {args.dtype} elements skipped")
        numel = max(sizes) // elem
        x_all, y_all, nccl_all = (torch.empty(numel, dtype=dtype, device=self.device) for _ in range(3))
        ar = self.ferry.AllReduce(self.comm, max(sizes))
        group_name = dist.group.WORLD.group_name
        symm_ops = torch.ops.symm_mem
        symm = {}

        def make_symm():
            import torch.distributed._symmetric_memory as symm_mem
            symm["buf"] = symm_mem.empty(numel, dtype=dtype, device=self.device)
            symm_mem.rendezvous(symm["buf"], group_name)
            symm["out"] = torch.empty(numel, dtype=dtype, device=self.device)
        symm_error = self.try_all(make_symm)
        value_range = max(1, min(8, 256 // self.world))  # every partial sum exact in bf16
        self.log(f"allreduce {args.dtype}: {len(sizes)} sizes {util.format_size(sizes[0])}..{util.format_size(sizes[-1])}"
                 f", {self.world} ranks" + (f"; symmetric memory n/a: {symm_error}" if symm_error else ""))
        for size in sizes:
            n = size // elem
            x, y, xn = x_all[:n], y_all[:n], nccl_all[:n]
            gen = torch.Generator(device=self.device)
            gen.manual_seed(args.seed * 1000003 + size * 17 + self.rank)
            x.copy_(torch.randint(-value_range, value_range + 1, (n,), generator=gen, device=self.device,
                                  dtype=torch.int8))
            xn.copy_(x)
            dist.all_reduce(xn)  # the reference
            y.fill_(float("nan"))
            check = {}

            def ferry_once():
                ar.allreduce(x, out=y)
                torch.cuda.synchronize()
                wrong = (y != xn).nonzero()
                check["bad"] = wrong.numel()
                if wrong.numel():
                    i = int(wrong[0])
                    check["detail"] = f"first at {i}: got {float(y[i])}, NCCL {float(xn[i])}"
            error = self.try_all(ferry_once)
            ops = args.graph_ops or max(1, min(10, (16 << 20) // size))
            cases = {"ferry": (error, lambda: ar.allreduce(x, out=y)),
                     "nccl": (None, lambda: dist.all_reduce(xn))}
            if symm_error is None:
                sb, so = symm["buf"][:n], symm["out"][:n]
                sb.copy_(x)
                cases["symm_one_shot"] = (None, lambda: symm_ops.one_shot_all_reduce_out(sb, "sum", group_name, so))
                cases["symm_two_shot"] = (None, lambda: symm_ops.two_shot_all_reduce_(sb, "sum", group_name))
            mismatch = ""
            if error is None:
                mismatch = self.gather_mismatch(check.get("bad", 0), check.get("detail", ""))
                if mismatch:
                    self.fail(f"ferry allreduce {args.dtype} {util.format_size(size)} != NCCL: {mismatch}")
            else:
                self.failures.append(f"ferry allreduce {util.format_size(size)} raised: {error}")
                self.log(f"ERROR: ferry allreduce {util.format_size(size)}: {error}")
            line = []
            for impl in util.ALLREDUCE_IMPLS:
                rec = {"kind": "allreduce", "bytes": size, "impl": impl, "us": None, "gbps": None, "graph": True,
                       "ops_per_graph": ops, "note": "", "check": "", "dtype": args.dtype,
                       "algorithm": ar.algorithm(size) if impl == "ferry" else ""}
                if impl == "ferry":
                    rec["check"] = "FAIL" if error or mismatch else "ok"
                err, op = cases.get(impl, (symm_error, None))
                if err is None:
                    err = self.try_all(op)  # a first eager call: argument errors, NCCL's connection setup
                if err:
                    rec["note"] = err
                else:
                    us, graph, why = util.time_op(op, ops, args.warmup, args.iters, not args.eager)
                    rec.update(us=us, gbps=util.busbw_gbps(size, us, self.world), graph=graph, note=why or "")
                self.records.append(rec)
                line.append(f"{impl} " + ("n/a" if rec["us"] is None else f"{rec['us']:.1f}us"))
            self.log(f"  {util.format_size(size):>5}: " + ", ".join(line))
        del x_all, y_all, nccl_all, symm, ar
        torch.cuda.empty_cache()

    # ------------------------------------------------------------------ EP
    def ep_inputs(self, tokens, experts):
        torch, args = self.torch, self.args
        gen = torch.Generator(device=self.device)
        gen.manual_seed(args.seed * 7919 + tokens * 31 + self.rank)
        x = torch.randn(tokens, args.hidden, generator=gen, device=self.device).to(torch.bfloat16)
        # topk distinct experts per token, uniformly: the k largest of E uniform draws
        idx = torch.rand(tokens, experts, generator=gen, device=self.device).topk(args.topk, dim=1).indices
        weight = torch.rand(tokens, args.topk, generator=gen, device=self.device) * 0.95 + 0.05
        return x, idx.contiguous(), weight

    def traffic(self, idx, local_experts):
        """[src][dst] tokens (a token once per destination rank) and rows ((token, expert) pairs)."""
        torch, world = self.torch, self.world
        dst = idx // local_experts
        onehot = torch.zeros(idx.shape[0], world, dtype=torch.int64, device=self.device)
        onehot.scatter_(1, dst, 1)
        mine = torch.stack([onehot.sum(0), torch.bincount(dst.flatten(), minlength=world)])
        every = torch.empty(world * 2, world, dtype=torch.int64, device=self.device)
        self.dist.all_gather_into_tensor(every, mine)
        every = every.view(world, 2, world).tolist()
        return [every[s][0] for s in range(world)], [every[s][1] for s in range(world)]

    def run_ferry_ep(self, mode, fp8, x, idx, weight, max_rows, expected_rows, use_graph):
        """mode: ht, ht_rows (high-throughput, rank rows: max_rows and expected_rows count
        tokens, not (token, expert) rows) or ll."""
        torch, args = self.torch, self.args
        ht, rank_rows = mode != "ll", mode == "ht_rows"
        kwargs = {"dtype": torch.float8_e4m3fn if fp8 else torch.bfloat16, "num_sms": args.ht_sms if ht else args.ll_sms,
                  "mode": "high_throughput" if ht else "low_latency"}
        if rank_rows:
            kwargs["layout"] = "rank_rows"
        if ht and "max_recv_rows" in inspect.signature(self.ferry.EpLayer).parameters:
            kwargs["max_recv_rows"] = max(1, max_rows)  # what this routing needs, as ferry-bench does
        inp = x
        if fp8 and ht:  # pre-quantized tokens and their scales (one per 128 columns)
            blocks = x.float().view(x.shape[0], -1, SCALE_BLOCK)
            scales = blocks.abs().amax(-1).clamp(min=1e-4) / 448.0
            inp = ((blocks / scales[..., None]).to(torch.float8_e4m3fn).view_as(x), scales.contiguous())
        st = {}

        def setup():
            # group None: the layer makes its own communicator, so finalize returns its GPU memory
            st["layer"] = layer = self.ferry.EpLayer(None, x.shape[0], args.hidden, args.topk, self.experts,
                                                     **kwargs)
            out, _, layout = layer.dispatch(inp, idx, weight)
            st["expert_out"] = out.clone() if not fp8 else torch.zeros(out.shape, dtype=torch.bfloat16,
                                                                       device=self.device)
            st["combined"] = torch.full(x.shape, float("nan"), dtype=torch.bfloat16, device=self.device)
            layer.combine(st["expert_out"], layout, out=st["combined"])
            torch.cuda.synchronize()
            rows = int(layout.source_offsets[-1]) if rank_rows else int(layout.expert_counts.sum())
            bad, detail = 0, ""
            if rows != expected_rows:
                bad, detail = 1, f"{rows} rows received, routing sends {expected_rows}"
            elif not fp8:
                # The dispatch output fed back: expanded rows are weighted by combine; rank rows
                # are summed as they are, once per rank the token reached.
                if rank_rows:
                    dst = idx // (self.experts // self.world)
                    reached = torch.zeros(idx.shape[0], self.world, dtype=torch.float32, device=self.device)
                    wsum = reached.scatter_(1, dst, 1.0).sum(1, keepdim=True)
                else:
                    wsum = weight.sum(1, keepdim=True)
                ref = x.float() * wsum
                diff = (st["combined"].float() - ref).abs()
                wrong = ~(diff <= 1e-2 * x.float().abs() * wsum + 1e-3)  # NaN counts as wrong
                bad = int(wrong.sum())
                if bad:
                    t, h = (int(v) for v in wrong.nonzero()[0])
                    detail = f"combine(dispatch) token {t} col {h}: {float(st['combined'][t, h])} vs {float(ref[t, h])}"
            st["bad"], st["detail"] = bad, detail
        error = self.try_all(setup)
        name = f"ferry ep {mode} {'fp8' if fp8 else 'bf16'}"  # ht_rows: rank rows
        if error:
            self.failures.append(f"{name} raised: {error}")
            self.log(f"ERROR: {name}: {error}")
            if util.agree_error(None if "layer" in st else "no layer") is None:
                try:
                    st["layer"].finalize()  # collective: only when every rank has the layer
                except Exception:  # noqa: BLE001 - already reported
                    pass
            return None, error, ""
        text = self.gather_mismatch(st["bad"], st["detail"])
        if text:
            self.fail(f"{name}: {text}")
        layer, expert_out, combined = st["layer"], st["expert_out"], st["combined"]
        state = {}

        def dispatch():
            state["layout"] = layer.dispatch(inp, idx, weight)[2]

        def combine():
            layer.combine(expert_out, state["layout"], out=combined)
        timed = util.time_steps([dispatch, combine], args.graph_iters, args.warmup, args.iters, use_graph)
        state.clear()
        layer.finalize()
        return timed, None, "FAIL" if text else ("ok" if not fp8 else "rows ok")

    def run_a2a(self, token_bytes, tokens, use_graph):
        torch, dist = self.torch, self.dist
        send_splits = tokens[self.rank]
        recv_splits = [tokens[src][self.rank] for src in range(self.world)]
        sent, received = sum(send_splits), sum(recv_splits)
        bf16_bytes = 2 * self.args.hidden
        send_buf = torch.randint(0, 256, (max(sent, 1) * bf16_bytes,), dtype=torch.uint8, device=self.device)
        recv_buf = torch.empty(max(received, 1) * bf16_bytes, dtype=torch.uint8, device=self.device)
        fwd_in, fwd_out = send_buf[:sent * token_bytes].view(sent, token_bytes), \
            recv_buf[:received * token_bytes].view(received, token_bytes)
        rev_in, rev_out = recv_buf[:received * bf16_bytes].view(received, bf16_bytes), \
            send_buf[:sent * bf16_bytes].view(sent, bf16_bytes)
        forward = lambda: dist.all_to_all_single(fwd_out, fwd_in, recv_splits, send_splits)  # noqa: E731
        reverse = lambda: dist.all_to_all_single(rev_out, rev_in, send_splits, recv_splits)  # noqa: E731
        error = self.try_all(lambda: (forward(), reverse()))
        if error:
            return None, error
        return util.time_steps([forward, reverse], self.args.graph_iters, self.args.warmup, self.args.iters,
                               use_graph), None

    def run_ep(self):
        torch, args = self.torch, self.args
        self.experts = experts = args.experts // self.world * self.world
        local = experts // self.world
        if local == 0 or args.topk > experts:
            self.failures.append(f"EP: {args.experts} experts, top-{args.topk}, on {self.world} ranks is not possible")
            self.log("ERROR: " + self.failures[-1])
            return
        self.log(f"EP: hidden {args.hidden}, top-{args.topk} of {experts} experts ({local} per rank"
                 + (f"; --experts {args.experts} rounded down to a multiple of {self.world}" if experts != args.experts
                    else "") + f"), uniform random routing, seed {args.seed}")
        ht_modes = {"both": ("ht", "ht_rows"), "expanded": ("ht",), "rank_rows": ("ht_rows",)}[args.ep_layout]
        modes = (ht_modes if args.ep_mode in ("both", "ht") else ()) + (("ll",) if args.ep_mode in ("both", "ll") else ())
        for mode in modes:
            tokens_per_rank = args.ht_tokens if mode != "ll" else args.ll_tokens
            x, idx, weight = self.ep_inputs(tokens_per_rank, experts)
            tokens, rows = self.traffic(idx, local)
            recv = [sum(tokens[s][d] for s in range(self.world)) for d in range(self.world)]
            recv_rows = [sum(rows[s][d] for s in range(self.world)) for d in range(self.world)]
            use_graph = mode == "ll" and not args.eager
            combine_recs = []
            for fp8 in ((False, True) if args.fp8 else (False,)):
                token_bytes = args.hidden + args.hidden // SCALE_BLOCK * 4 if fp8 else 2 * args.hidden
                self.dist.barrier()
                by_token = mode == "ht_rows"  # rank rows: one row per token and rank
                ferry_timed, ferry_error, check = self.run_ferry_ep(
                    mode, fp8, x, idx, weight, max(recv if by_token else recv_rows),
                    (recv if by_token else recv_rows)[self.rank], use_graph)
                self.dist.barrier()
                a2a_timed, a2a_error = self.run_a2a(token_bytes, tokens, use_graph)
                torch.cuda.empty_cache()
                for step, op in ((0, f"dispatch {'fp8' if fp8 else 'bf16'}"), (1, "combine bf16")):
                    if step == 1 and fp8:
                        continue  # combine is bf16 whatever was dispatched: reported from the bf16 layer
                    nbytes = max(recv) * (token_bytes if step == 0 else 2 * args.hidden)
                    for impl, timed, error in (("ferry", ferry_timed, ferry_error),
                                               ("all_to_all_single", a2a_timed, a2a_error)):
                        rec = {"kind": "ep", "mode": mode, "op": op, "tokens": tokens_per_rank,
                               "recv_tokens": max(recv), "bytes": nbytes, "impl": impl, "us": None, "gbps": None,
                               "graph": True, "note": error or "", "check": check if impl == "ferry" else "",
                               "dtype": "fp8" if fp8 and step == 0 else "bf16"}
                        if timed:
                            us = timed[0][step]
                            rec.update(us=us, gbps=nbytes / (us * 1e3), graph=timed[1],
                                       note=(timed[2] or "") if use_graph else "")
                        (combine_recs if step == 1 else self.records).append(rec)
                        self.log(f"  {mode} {op} {impl}: " + ("n/a" if rec["us"] is None else
                                                              f"{rec['us']:.1f}us {rec['gbps']:.1f} GB/s"))
            self.records += combine_recs


def selftest(args):
    records = util.synthetic_records(world=8)
    assert util.parse_sizes("8K:256M:4,1G")[:3] == [8192, 32768, 131072] and util.format_size(256 << 20) == "256M"
    text = util.report(args.out, records, 8, "bf16", "selftest: synthetic numbers, 8 ranks (no GPU)", failures=[])
    for name in ("torch_bench.csv", "torch_bench.png"):
        path = os.path.join(args.out, name)
        assert os.path.getsize(path) > 0, path
    print(text)
    return 0


def main(argv=None):
    args = parse_args(argv)
    if args.selftest_plot:
        return selftest(args)
    for name, default in (("MASTER_ADDR", "localhost"), ("MASTER_PORT", "29517"), ("RANK", "0"), ("WORLD_SIZE", "1")):
        os.environ.setdefault(name, default)  # plain `python3 ferry_torch_bench.py`: one rank
    import torch
    import torch.distributed as dist
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    try:
        import ferry
    except ImportError as exc:
        if dist.get_rank() == 0:
            print(f"error: cannot import ferry ({exc}); build it (cmake -DFERRY_BUILD_PYTHON=ON) and set "
                  f"PYTHONPATH=build/python, or pip install .", file=sys.stderr)
        dist.destroy_process_group()
        return 2
    bench = Bench(args, torch, dist, ferry)
    try:
        import torch.cuda.nccl
        nccl = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception:  # noqa: BLE001 - only for the title
        nccl = "?"
    title = (f"ferry vs PyTorch {torch.__version__} (NCCL {nccl}), {bench.world} x "
             f"{torch.cuda.get_device_name()}")
    bench.log(title)
    if "allreduce" in args.what:
        bench.run_allreduce()
    if "ep" in args.what:
        bench.run_ep()
    dist.barrier()
    if bench.rank == 0:
        print()
        print(util.report(args.out, bench.records, bench.world, args.dtype, title, bench.failures), flush=True)
    dist.barrier()  # a rank that exits early (non-zero) would make torchrun kill rank 0 mid-report
    dist.destroy_process_group()
    return 1 if bench.failures and bench.rank == 0 else 0  # rank 0 knows every failure


if __name__ == "__main__":
    sys.exit(main())
