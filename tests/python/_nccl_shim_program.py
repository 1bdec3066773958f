"""A small torch.distributed (NCCL backend) program for test_gpu_nccl_shim.py,
run under torchrun, once with libferry_nccl.so in LD_PRELOAD and once without.

    torchrun --standalone --nproc-per-node 2 _nccl_shim_program.py OUT_DIR [--bench]

Every rank all-reduces fresh inputs (integer-valued, so sums, maxima and
products are exact in every dtype, and every rank can regenerate every rank's
inputs), checks each result against a host reference, and writes
OUT_DIR/rank<R>.json: per case whether it was right and a digest of the result
bytes (the two runs must agree bit for bit). Eager calls and CUDA graphs
(captured once, replayed with new inputs). --bench adds latencies of bf16 sum
all_reduce, eager (calls back to back) and in a CUDA graph, in microseconds.
Not a pytest file (the leading underscore keeps it out of collection).
"""
import datetime
import hashlib
import json
import os
import sys

import torch
import torch.distributed as dist

R = dist.ReduceOp
OPS = {"sum": R.SUM, "max": R.MAX, "min": R.MIN, "avg": R.AVG, "prod": R.PRODUCT}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "fp64": torch.float64,
          "int32": torch.int32, "int8": torch.int8}


def inputs(rank, tag, n, dtype, op):
    g = torch.Generator().manual_seed(tag * 1009 + rank)
    if op == "prod":
        x = torch.tensor([-2, -1, 1, 2], dtype=torch.float64)[torch.randint(0, 4, (n,), generator=g)]
    else:
        x = torch.randint(-8, 9, (n,), generator=g).to(torch.float64)
    return x.to(dtype)


def reference(world, tag, n, dtype, op):
    xs = torch.stack([inputs(r, tag, n, dtype, op).to(torch.float64) for r in range(world)])
    out = {"sum": lambda: xs.sum(0), "max": lambda: xs.amax(0), "min": lambda: xs.amin(0),
           "prod": lambda: xs.prod(0), "avg": lambda: xs.sum(0) / world}[op]()
    return out.to(dtype)


def digest(t):
    return hashlib.sha256(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()[:16]


def verdict(got, want, op):
    got, want = got.cpu(), want.cpu()
    if op == "avg":  # the division may round differently (NCCL pre-multiplies by 1/n)
        ok = torch.allclose(got.double(), want.double(), rtol=2e-2, atol=2e-2)
    else:
        ok = torch.equal(got, want)
    if ok:
        return True, ""
    bad = (got.double() - want.double()).abs().gt(0) | got.double().isnan()
    i = int(bad.nonzero()[0]) if bad.any() else 0
    return False, f"{int(bad.sum())} of {got.numel()} wrong, first [{i}] {got[i].item()} != {want[i].item()}"


def cases():
    tag = 0
    for dt in ("fp32", "bf16", "fp16"):
        for op in OPS:
            for n in (1, 1000, 4099, 262147):
                tag += 1
                yield f"{dt} {op} {n}", tag, n, dt, op
        for op in ("sum", "avg"):
            for n in ((1 << 20) + 3, 4 << 20):
                tag += 1
                yield f"{dt} {op} {n}", tag, n, dt, op
    for dt in ("fp64", "int32", "int8"):  # ferry has fp64 and int32; int8 it lacks: forwarded
        tag += 1
        yield f"{dt} sum 4099", tag, 4099, dt, "sum"


GRAPH_CASES = [("fp32", "sum", 262147), ("bf16", "sum", (1 << 20) + 3), ("fp16", "max", 4099), ("bf16", "avg", 1000)]


def run_graph(rank, world, dev, dt, op, n, base_tag, results):
    dtype = DTYPES[dt]
    static = inputs(rank, base_tag, n, dtype, op).to(dev)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture, as torch's docs ask
        dist.all_reduce(static, op=OPS[op])
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dist.all_reduce(static, op=OPS[op])
    for replay in range(3):
        tag = base_tag + 1 + replay
        static.copy_(inputs(rank, tag, n, dtype, op).to(dev))
        graph.replay()
        torch.cuda.synchronize()
        ok, why = verdict(static, reference(world, tag, n, dtype, op), op)
        results[f"graph {dt} {op} {n} replay {replay}"] = {"ok": ok, "why": why, "digest": digest(static)}
    del graph


def bench(dev):
    """bf16 sum latencies (us): eager = event time of 200 back-to-back calls / 200;
    graph = replay of 50 captured calls / 50; median of 5."""
    out = {}
    for nbytes in (8, 1024, 8192, 65536, 262144, 1 << 20, 4 << 20, 16 << 20):
        x = torch.zeros(max(1, nbytes // 2), dtype=torch.bfloat16, device=dev)
        for _ in range(20):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        eager = []
        for _ in range(5):
            dist.barrier()
            start.record()
            for _ in range(200):
                dist.all_reduce(x)
            stop.record()
            stop.synchronize()
            eager.append(start.elapsed_time(stop) * 1e3 / 200)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            dist.all_reduce(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(50):
                dist.all_reduce(x)
        graph.replay()
        torch.cuda.synchronize()
        replays = []
        for _ in range(5):
            dist.barrier()
            start.record()
            graph.replay()
            stop.record()
            stop.synchronize()
            replays.append(start.elapsed_time(stop) * 1e3 / 50)
        del graph
        out[str(nbytes)] = {"eager_us": sorted(eager)[2], "graph_us": sorted(replays)[2]}
    return out


def main():
    out_dir = sys.argv[1]
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev, timeout=datetime.timedelta(seconds=120))
    results = {}
    for name, tag, n, dt, op in cases():
        dtype = DTYPES[dt]
        x = inputs(rank, tag, n, dtype, op).to(dev)
        dist.all_reduce(x, op=OPS[op])
        torch.cuda.synchronize()
        ok, why = verdict(x, reference(world, tag, n, dtype, op), op)
        results["eager " + name] = {"ok": ok, "why": why, "digest": digest(x)}
    for i, (dt, op, n) in enumerate(GRAPH_CASES):
        run_graph(rank, world, dev, dt, op, n, 10000 + 100 * i, results)
    report = {"rank": rank, "world": world, "nccl": ".".join(map(str, torch.cuda.nccl.version())), "cases": results}
    if "--bench" in sys.argv[2:]:
        report["bench"] = bench(dev)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(report, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()
    print(f"NCCL SHIM PROGRAM DONE rank {rank}", flush=True)


if __name__ == "__main__":
    main()
