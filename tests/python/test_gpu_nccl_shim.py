"""libferry_nccl.so under PyTorch (issue 25): torch.distributed's NCCL backend
with the shim in LD_PRELOAD gives the same results as without it, and ferry
takes the calls.

The test starts torchrun itself, twice, on 2 GPUs: _nccl_shim_program.py once
with LD_PRELOAD=ferry.nccl_shim_path(), FERRY_NCCL_SHIM_LOG=1 and
FERRY_NCCL_LIBRARY set to the very NCCL torch loads (so the shim forwards to
the library torch was built for), and once plain. Each run checks every result
against its own host reference (all_reduce sum/max/min/avg/prod of fp32, bf16,
fp16 at 1 element to 4M elements, fp64, int32, and int8 which ferry lacks, eager and
replayed CUDA graphs); the test then requires every case right in both runs,
equal result bytes between the runs, and the shim's log to show ferry took
ncclAllReduce calls (fp64 and int32 among them) and forwarded the int8 one.

Skipped under torchrun (its ranks would hold the GPUs and wait in their next
collective while this runs; scripts/device_nccl_shim.sh runs it alone with
`python -m pytest tests/python/test_gpu_nccl_shim.py`), with fewer than 2 GPUs
(NCCL refuses two ranks on one GPU), and where the build has no shim.
FERRY_NCCL_SHIM_BENCH=1 also prints bf16 sum all_reduce latencies without and with the shim (the
latter from a third run without FERRY_NCCL_SHIM_LOG, whose per-call line would count).
"""
import json
import os
import re
import subprocess
import sys

import pytest
import torch

import ferry

GPU_SKIPPED_LINE = "FERRY PYTHON GPU TESTS SKIPPED"
PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_nccl_shim_program.py")
TIMEOUT_S = 420
_PARENT_LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                       "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT")
ROUTE = re.compile(r"\[ferry-nccl\] rank \d+: ncclAllReduce count \d+ type (\d+) op \d+ -> (ferry|NCCL)")


def torch_nccl_library():
    """The libnccl torch has loaded (from this process's mappings), else the
    nvidia.nccl wheel's; None when neither is found."""
    torch.cuda.nccl.version()  # makes sure torch's NCCL is mapped
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if re.search(r"/libnccl\.so(\.\d+)*$", path):
                    return path
    except OSError:
        pass
    try:
        import nvidia.nccl as m
        path = os.path.join(list(m.__path__)[0], "lib", "libnccl.so.2")
        return path if os.path.isfile(path) else None
    except ImportError:
        return None


def _skip_reason():
    if "WORLD_SIZE" in os.environ:
        return ("runs outside torchrun (scripts/device_nccl_shim.sh runs "
                "`python -m pytest tests/python/test_gpu_nccl_shim.py`): it starts torchrun itself")
    if torch.cuda.device_count() < 2:
        return f"{GPU_SKIPPED_LINE}: needs 2 GPUs ({torch.cuda.device_count()} visible); NCCL refuses two ranks on one GPU"
    if ferry.nccl_shim_path() is None:
        return "this build has no libferry_nccl.so"
    return None


def _child_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in _PARENT_LAUNCH_VARS and not k.startswith("TORCHELASTIC_")}
    env.setdefault("NCCL_NVLS_ENABLE", "0")  # never NVLink multicast objects (shared host)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _run(out_dir, bench, **env):
    os.makedirs(out_dir, exist_ok=True)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", PROGRAM,
           str(out_dir)] + (["--bench"] if bench else [])
    try:
        proc = subprocess.run(cmd, env=_child_env(**env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=TIMEOUT_S)
        rc, log = proc.returncode, proc.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode(errors="replace")
        rc, log = None, out + f"\n[timed out after {TIMEOUT_S} s]"
    with open(os.path.join(out_dir, "log.txt"), "w") as f:
        f.write(log)
    reports = []
    for r in range(2):
        path = os.path.join(out_dir, f"rank{r}.json")
        if os.path.isfile(path):
            with open(path) as f:
                reports.append(json.load(f))
    return rc, log, reports


def _tail(log, n=40):
    return "\n".join(log.splitlines()[-n:])


def _bench_table(plain, shim):
    rows = ["bytes      eager NCCL  eager shim   graph NCCL  graph shim   (bf16 sum, us, rank 0)"]
    for nbytes, p in plain.get("bench", {}).items():
        s = shim.get("bench", {}).get(nbytes, {})
        rows.append(f"{int(nbytes):>9}  {p['eager_us']:>10.2f}  {s.get('eager_us', float('nan')):>10.2f}   "
                    f"{p['graph_us']:>10.2f}  {s.get('graph_us', float('nan')):>10.2f}")
    return "\n".join(rows)


def test_torch_all_reduce_through_the_shim(tmp_path):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    real = os.environ.get("FERRY_NCCL_LIBRARY") or torch_nccl_library()
    assert real, "could not find the libnccl torch uses; set FERRY_NCCL_LIBRARY"
    bench = os.environ.get("FERRY_NCCL_SHIM_BENCH") == "1"
    out = os.environ.get("FERRY_NCCL_SHIM_OUT") or str(tmp_path)

    rc_plain, log_plain, plain = _run(os.path.join(out, "plain"), bench)
    assert rc_plain == 0 and len(plain) == 2, f"run without the shim failed (rc {rc_plain}):\n{_tail(log_plain)}"
    # The checked run logs every call's route (FERRY_NCCL_SHIM_LOG=1, a line to stderr per call), which
    # would count in eager latencies: the shim's latencies come from a third run without the log.
    rc_shim, log_shim, shim = _run(os.path.join(out, "shim"), False, LD_PRELOAD=ferry.nccl_shim_path(),
                                   FERRY_NCCL_LIBRARY=real, FERRY_NCCL_SHIM_LOG=1)
    assert rc_shim == 0 and len(shim) == 2, f"run with the shim failed (rc {rc_shim}):\n{_tail(log_shim)}"

    failures = []
    for label, reports in (("without the shim", plain), ("with the shim", shim)):
        for rep in reports:
            for case, res in rep["cases"].items():
                if not res["ok"]:
                    failures.append(f"{label}, rank {rep['rank']}: {case}: {res['why']}")
    for rp, rs in zip(plain, shim):
        for case, res in rp["cases"].items():
            other = rs["cases"].get(case)
            if other is None or other["digest"] != res["digest"]:
                failures.append(f"rank {rp['rank']}: {case}: result bytes differ with and without the shim")
    assert not failures, "\n".join(failures[:40])

    routes = ROUTE.findall(log_shim)
    took = sum(1 for _, route in routes if route == "ferry")
    forwarded_types = {int(t) for t, route in routes if route == "NCCL"}
    ferry_types = {int(t) for t, route in routes if route == "ferry"}
    print(f"\n[nccl-shim] torch {torch.__version__}, NCCL {shim[0]['nccl']} ({real}): ferry took {took} "
          f"ncclAllReduce calls, NCCL {len(routes) - took}")
    assert took > 0, "the shim's log shows no ncclAllReduce on ferry:\n" + _tail(log_shim)
    # fp64 (ncclFloat64 = 8) and int32 (ncclInt32 = 2) run on ferry; int8 (ncclInt8 = 0) goes to NCCL.
    assert {2, 8} <= ferry_types, f"fp64/int32 calls not on ferry: {sorted(ferry_types)}"
    assert 0 in forwarded_types, f"the int8 call was not forwarded: {sorted(forwarded_types)}"
    if bench:
        rc_bench, log_bench, shim_bench = _run(os.path.join(out, "shim_bench"), True,
                                               LD_PRELOAD=ferry.nccl_shim_path(), FERRY_NCCL_LIBRARY=real)
        assert rc_bench == 0 and shim_bench, f"latency run with the shim failed (rc {rc_bench}):\n{_tail(log_bench)}"
        print(_bench_table(plain[0], shim_bench[0]))
