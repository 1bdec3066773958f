"""Helpers of ferry_torch_bench.py: sizes, CUDA-event timing (graph replay or eager),
agreement across ranks, the result table, the CSV and the plot.

Results are plain dicts (one per measured case and implementation), so the table,
CSV and plot can be made from synthetic numbers (--selftest-plot) without a GPU:
  allreduce: kind="allreduce", bytes, impl, algorithm, us, gbps (busbw), graph, ops_per_graph, note, check
  ep:        kind="ep", mode ("ht"/"ll"), op ("dispatch bf16", "combine bf16", ...), tokens,
             recv_tokens, bytes (received payload), impl, us, gbps, graph, note, check
`us` is None when the case could not run (`note` says why); `graph` False: timed
eagerly; `check` is "ok", "FAIL" or "" (not checked).
"""

from __future__ import annotations

import csv
import math
import os
import statistics

ALLREDUCE_IMPLS = ("ferry", "nccl", "symm_one_shot", "symm_two_shot")
ALLREDUCE_LABELS = {"ferry": "ferry", "nccl": "NCCL", "symm_one_shot": "symm 1-shot", "symm_two_shot": "symm 2-shot"}
EP_IMPLS = ("ferry", "all_to_all_single")
EP_LABELS = {"ferry": "ferry", "all_to_all_single": "all_to_all_single"}
DEVICE = "cuda"  # where max_over_ranks reduces (the current CUDA device)
CSV_COLUMNS = ("kind", "world_size", "dtype", "bytes", "mode", "op", "tokens", "recv_tokens", "impl", "algorithm",
               "time_us", "gbps", "graph", "ops_per_graph", "check", "note")

# ----------------------------------------------------------------------------- sizes

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20,
          "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}


def parse_size(text: str) -> int:
    """'8K' -> 8192, '256M', '1G', '4096' (K/M/G are powers of 1024)."""
    text = text.strip().upper()
    digits = text.rstrip("KMGIB")
    unit = text[len(digits):]
    if not digits or unit not in _UNITS:
        raise ValueError(f"not a size: {text!r} (examples: 8K, 256M, 4096)")
    return int(float(digits) * _UNITS[unit])


def parse_sizes(text: str) -> list:
    """Comma list of sizes or ranges LO:HI[:FACTOR] (factor 2 by default): '8K:256M:4,512M'."""
    sizes = set()
    for item in filter(None, (s.strip() for s in text.split(","))):
        parts = item.split(":")
        if len(parts) == 1:
            sizes.add(parse_size(parts[0]))
            continue
        lo, hi = parse_size(parts[0]), parse_size(parts[1])
        factor = int(parts[2]) if len(parts) > 2 else 2
        if factor < 2 or lo <= 0 or lo > hi:
            raise ValueError(f"bad size range {item!r} (LO:HI[:FACTOR], 0 < LO <= HI, FACTOR >= 2)")
        while lo <= hi:
            sizes.add(lo)
            lo *= factor
    if not sizes:
        raise ValueError("no sizes given")
    return sorted(sizes)


def format_size(nbytes: int) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return str(nbytes)


def busbw_gbps(nbytes: int, us: float, world: int) -> float:
    """nccl-tests bus bandwidth: bytes / t * 2(n-1)/n."""
    return nbytes / (us * 1e3) * 2.0 * (world - 1) / world


def short_error(exc) -> str:
    text = f"{type(exc).__name__}: {exc}" if isinstance(exc, BaseException) else str(exc)
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:197] + "..."

# ----------------------------------------------------------------------------- ranks


def agree_error(error):
    """Collective: the first failing rank's error ("rank r: ..."), or None when no rank failed."""
    import torch.distributed as dist
    errors = [None] * dist.get_world_size()
    dist.all_gather_object(errors, error)
    for rank, err in enumerate(errors):
        if err:
            return f"rank {rank}: {err}"
    return None


def max_over_ranks(values):
    """Collective: elementwise max over ranks of a list of floats."""
    import torch
    import torch.distributed as dist
    t = torch.tensor(list(values), dtype=torch.float64, device=DEVICE)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()

# ----------------------------------------------------------------------------- timing


def _capture(body):
    """(graph, None) when `body` captures into a CUDA graph, else (None, why)."""
    import torch
    graph = torch.cuda.CUDAGraph()
    try:
        # thread_local: NCCL's and PyTorch's helper threads may call CUDA meanwhile.
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            body()
        return graph, None
    except Exception as exc:  # noqa: BLE001 - any capture failure means: time it eagerly
        try:
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001
            pass
        return None, short_error(exc)


def time_op(op, ops_per_graph: int, warmup: int, iters: int, use_graph: bool):
    """Collective. `ops_per_graph` calls of `op` captured into one CUDA graph (eager
    launches if capture fails on any rank), `warmup` replays, then `iters` timed
    replays with an event between consecutive ones. Returns (us per op: median over
    replays / ops_per_graph, max over ranks; used_graph; why not a graph or None)."""
    import torch
    body = lambda: [op() for _ in range(ops_per_graph)]  # noqa: E731
    graph, why = _capture(body) if use_graph else (None, "graphs off (--eager)")
    why = agree_error(why) if use_graph else why
    run = graph.replay if why is None else body
    for _ in range(warmup):
        run()
    torch.cuda.synchronize()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    events[0].record()
    for i in range(iters):
        run()
        events[i + 1].record()
    torch.cuda.synchronize()
    ms = statistics.median(events[i].elapsed_time(events[i + 1]) for i in range(iters))
    return max_over_ranks([ms * 1e3 / ops_per_graph])[0], why is None, why


def time_steps(steps, iters_per_graph: int, warmup: int, iters: int, use_graph: bool):
    """Collective. Steps that run in order (dispatch, then combine), each timed on its
    own: one iteration runs every step with an event after each; `iters_per_graph`
    iterations are captured into one CUDA graph whose event-record nodes time each
    step in every replay (or launched eagerly, same events). Returns (per step: median
    over iterations in us, max over ranks; used_graph; why not a graph or None)."""
    import torch
    nsteps = len(steps)
    events = []

    def body():
        events[0].record()
        boundary = 0
        for _ in range(iters_per_graph):
            for step in steps:
                step()
                boundary += 1
                events[boundary].record()

    def make_events(external):
        events[:] = [torch.cuda.Event(enable_timing=True, external=external)
                     for _ in range(iters_per_graph * nsteps + 1)]
        for event in events:  # created here, not during the capture
            event.record()
        torch.cuda.synchronize()

    graph, why = None, "graphs off (eager timing)"
    if use_graph:
        make_events(True)  # external: recorded by event nodes inside the graph
        graph, why = _capture(body)
        why = agree_error(why)
    if why is not None:
        make_events(False)
    run = graph.replay if why is None else body
    for _ in range(max(1, math.ceil(warmup / iters_per_graph))):
        run()
    torch.cuda.synchronize()
    step_ms = [[] for _ in steps]
    for _ in range(max(1, math.ceil(iters / iters_per_graph))):
        run()
        torch.cuda.synchronize()  # the next replay records the same events again
        for seg in range(iters_per_graph * nsteps):
            step_ms[seg % nsteps].append(events[seg].elapsed_time(events[seg + 1]))
    us = max_over_ranks([statistics.median(ms) * 1e3 for ms in step_ms])
    return us, why is None, why

# ----------------------------------------------------------------------------- table


class Footnotes:
    def __init__(self):
        self.notes = []

    def ref(self, text: str) -> str:
        if text not in self.notes:
            self.notes.append(text)
        return f"[{self.notes.index(text) + 1}]"

    def lines(self):
        return [f"  [{i + 1}] {text}" for i, text in enumerate(self.notes)]


def _fmt_us(us):
    return f"{us:.0f}" if us >= 1000 else f"{us:.1f}"


def _cells(record, notes: Footnotes, star: bool = True):
    """(µs cell, GB/s cell) of one record: '!' failed check, '*' eager (when `star`), [k] a note."""
    if record is None:
        return "-", "-"
    if record.get("us") is None:
        return "n/a" + notes.ref(f"{record['impl']}: {record.get('note') or 'not measured'}"), "-"
    us = _fmt_us(record["us"])
    if record.get("check") == "FAIL":
        us += "!"
    if not record.get("graph", True):
        us += "*" if star else ""
        if record.get("note"):
            us += notes.ref(f"{record['impl']}: timed eagerly ({record['note']})")
    return us, f"{record['gbps']:.1f}"


def render_table(headers, rows) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)]
    line = lambda cells: "  ".join(str(c).rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([line(headers), "  ".join("-" * w for w in widths)] + [line(r) for r in rows])


def allreduce_table(records, world: int, dtype: str) -> str:
    recs = [r for r in records if r["kind"] == "allreduce"]
    if not recs:
        return ""
    by_case = {(r["bytes"], r["impl"]): r for r in recs}
    notes = Footnotes()
    headers = ["size", "ferry algo"]
    for impl in ALLREDUCE_IMPLS:
        headers += [f"{ALLREDUCE_LABELS[impl]} µs", "GB/s"]
    headers.append("x NCCL")
    rows = []
    for size in sorted({r["bytes"] for r in recs}):
        ferry = by_case.get((size, "ferry"))
        row = [format_size(size), (ferry or {}).get("algorithm") or "-"]
        for impl in ALLREDUCE_IMPLS:
            row += _cells(by_case.get((size, impl)), notes)
        nccl = by_case.get((size, "nccl"))
        ok = ferry and nccl and ferry.get("us") and nccl.get("us")
        row.append(f"{nccl['us'] / ferry['us']:.2f}" if ok else "-")
        rows.append(row)
    title = (f"AllReduce {dtype}, {world} ranks: µs per op (CUDA graph of G ops, replay / G, median over replays,"
             f" max over ranks); GB/s = busbw = bytes/t*2(n-1)/n; x NCCL = NCCL µs / ferry µs;"
             f" * = timed eagerly, ! = failed check")
    return "\n".join([title, render_table(headers, rows)] + notes.lines())


def ep_table(records, world: int) -> str:
    recs = [r for r in records if r["kind"] == "ep"]
    if not recs:
        return ""
    by_case = {(r["mode"], r["op"], r["impl"]): r for r in recs}
    notes = Footnotes()
    headers = ["mode", "op", "tokens", "recv tok", "timing"]
    for impl in EP_IMPLS:
        headers += [f"{EP_LABELS[impl]} µs", "GB/s"]
    headers.append("x a2a")
    rows = []
    seen = []
    for r in recs:
        if (r["mode"], r["op"]) not in seen:
            seen.append((r["mode"], r["op"]))
    for mode, op in seen:
        ferry = by_case.get((mode, op, "ferry"))
        a2a = by_case.get((mode, op, "all_to_all_single"))
        first = ferry or a2a
        timed = {r.get("graph", True) for r in (ferry, a2a) if r and r.get("us") is not None}
        row = [mode, op, first["tokens"], first["recv_tokens"],
               {frozenset([True]): "graph", frozenset([False]): "eager"}.get(frozenset(timed), "mixed" if timed else "-")]
        for impl in EP_IMPLS:
            row += _cells(by_case.get((mode, op, impl)), notes, star=False)
        ok = ferry and a2a and ferry.get("us") and a2a.get("us")
        row.append(f"{a2a['us'] / ferry['us']:.2f}" if ok else "-")
        rows.append(row)
    title = (f"EP, {world} ranks: µs per op (median over iterations, max over ranks); GB/s = token payload"
             f" received by the busiest rank, its own included / t (DeepEP); x a2a = a2a µs / ferry µs;"
             f" ht is timed eagerly (dispatch syncs once for the counts), ll in CUDA graphs")
    return "\n".join([title, render_table(headers, rows)] + notes.lines())

# ----------------------------------------------------------------------------- csv, plot


def write_csv(path: str, records, world: int, dtype: str) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for r in records:
            us = r.get("us")
            writer.writerow({
                "kind": r["kind"], "world_size": world, "dtype": r.get("dtype", dtype), "bytes": r.get("bytes", ""),
                "mode": r.get("mode", ""), "op": r.get("op", "allreduce"), "tokens": r.get("tokens", ""),
                "recv_tokens": r.get("recv_tokens", ""), "impl": r["impl"], "algorithm": r.get("algorithm", ""),
                "time_us": "" if us is None else f"{us:.3f}", "gbps": "" if us is None else f"{r['gbps']:.3f}",
                "graph": "" if us is None else int(bool(r.get("graph", True))),
                "ops_per_graph": r.get("ops_per_graph", ""), "check": r.get("check", ""), "note": r.get("note", "")})


def plot(path: str, records, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    ar = [r for r in records if r["kind"] == "allreduce"]
    ep = [r for r in records if r["kind"] == "ep"]
    panels = (2 if ar else 0) + (1 if ep else 0)
    if panels == 0:
        return
    fig, axes = plt.subplots(1, panels, figsize=(6.4 * panels, 4.8), squeeze=False)
    axes = list(axes[0])
    if ar:
        ax_lat, ax_bw = axes.pop(0), axes.pop(0)
        for impl in ALLREDUCE_IMPLS:
            pts = sorted((r["bytes"], r["us"], r["gbps"], r.get("graph", True)) for r in ar
                         if r["impl"] == impl and r.get("us") is not None)
            if not pts:
                continue
            graphs = {p[3] for p in pts}
            label = ALLREDUCE_LABELS[impl] + ("" if graphs == {True} else " (eager)" if graphs == {False}
                                              else " (some eager)")
            xs = [p[0] for p in pts]
            ax_lat.plot(xs, [p[1] for p in pts], marker="o", ms=3, label=label)
            ax_bw.plot(xs, [p[2] for p in pts], marker="o", ms=3, label=label)
        ax_lat.set(xscale="log", yscale="log", xlabel="bytes", ylabel="µs per allreduce", title="AllReduce latency")
        ax_bw.set(xscale="log", xlabel="bytes", ylabel="busbw GB/s", title="AllReduce bus bandwidth")
        for ax in (ax_lat, ax_bw):
            sizes = sorted({r["bytes"] for r in ar})
            ticks = sizes[::max(1, len(sizes) // 8)]
            ax.set_xticks(ticks, [format_size(s) for s in ticks])
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
    if ep:
        ax = axes.pop(0)
        groups = []
        for r in ep:
            if (r["mode"], r["op"]) not in groups:
                groups.append((r["mode"], r["op"]))
        width = 0.8 / len(EP_IMPLS)
        for i, impl in enumerate(EP_IMPLS):
            by_group = {(r["mode"], r["op"]): r for r in ep if r["impl"] == impl}
            xs, heights, labels = [], [], []
            for g, key in enumerate(groups):
                r = by_group.get(key)
                if r is None or r.get("us") is None:
                    continue
                xs.append(g + (i - (len(EP_IMPLS) - 1) / 2) * width)
                heights.append(r["gbps"])
                labels.append(_fmt_us(r["us"]) + "µs")
            bars = ax.bar(xs, heights, width, label=EP_LABELS[impl])
            ax.bar_label(bars, labels=labels, fontsize=7, rotation=90, padding=2)
        ax.set_xticks(range(len(groups)), [f"{m}\n{op}" for m, op in groups], fontsize=8)
        ax.set(ylabel="GB/s (received payload incl. own / t)", title="EP dispatch / combine")
        ax.margins(y=0.2)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def report(out_dir: str, records, world: int, dtype: str, title: str, failures) -> str:
    """Writes DIR/torch_bench.csv and DIR/torch_bench.png; returns the text to print
    last: where the files are, the tables, and the failed checks."""
    os.makedirs(out_dir, exist_ok=True)
    csv_path = os.path.join(out_dir, "torch_bench.csv")
    png_path = os.path.join(out_dir, "torch_bench.png")
    write_csv(csv_path, records, world, dtype)
    lines = [f"wrote {csv_path}"]
    try:
        plot(png_path, records, title)
        lines.append(f"wrote {png_path}")
    except Exception as exc:  # noqa: BLE001 - a missing matplotlib must not lose the table
        lines.append(f"no plot: {short_error(exc)}")
    lines += ["", title]
    for table in (allreduce_table(records, world, dtype), ep_table(records, world)):
        if table:
            lines += ["", table]
    if failures:
        lines += ["", "!" * 72] + [f"FAILED: {f}" for f in failures] + ["!" * 72]
    return "\n".join(lines)


def synthetic_records(world: int = 8):
    """Made-up numbers in plausible ranges (for --selftest-plot): no GPU involved."""
    records = []
    for k, size in enumerate(parse_sizes("8K:256M:2")):
        for impl, base, peak in (("ferry", 8.0, 360.0), ("nccl", 20.0, 342.0), ("symm_one_shot", 10.0, 150.0),
                                 ("symm_two_shot", 14.0, 300.0)):
            us = base + size / (peak * 1e3) * 2 * (world - 1) / world
            rec = {"kind": "allreduce", "bytes": size, "impl": impl, "us": us,
                   "gbps": busbw_gbps(size, us, world), "graph": True, "ops_per_graph": 10, "note": "",
                   "algorithm": ("one_shot" if size <= (256 << 10) else "two_shot") if impl == "ferry" else "",
                   "check": "ok" if impl == "ferry" else ""}
            if impl == "symm_one_shot" and size > (64 << 20):
                rec.update(us=None, gbps=None, note="RuntimeError: out of memory (synthetic)")
            if impl == "symm_two_shot" and k == 3:
                rec.update(graph=False, note="capture failed (synthetic)")
            records.append(rec)
    for mode, tokens, recv in (("ht", 4096, 3 * 4096 * 8 // 4), ("ll", 128, 128 * 8 * 3 // 4)):
        for op, tb, ferry_us, a2a_us in (("dispatch bf16", 14336, 900.0, 2100.0), ("dispatch fp8", 7392, 520.0, 1200.0),
                                         ("combine bf16", 14336, 1100.0, 2100.0)):
            scale = 1.0 if mode == "ht" else 0.04
            for impl, us in (("ferry", ferry_us * scale), ("all_to_all_single", a2a_us * scale)):
                records.append({"kind": "ep", "mode": mode, "op": op, "tokens": tokens, "recv_tokens": recv,
                                "dtype": op.split()[-1],
                                "bytes": recv * tb, "impl": impl, "us": us, "gbps": recv * tb / (us * 1e3),
                                "graph": mode == "ll", "note": "", "check": "ok" if impl == "ferry" else ""})
    return records
