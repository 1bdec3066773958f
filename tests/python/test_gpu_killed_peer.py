"""Killed peers from Python (issue 15): a rank killed with SIGKILL in the middle
of ferry.AllReduce.allreduce, EpLayer.dispatch or EpLayer.combine (both modes),
on one node and across 2 virtual nodes, makes the survivor raise a ferry.Error
naming the dead rank and the phase within a few timeouts; the survivor then drops
its ferry objects and its interpreter exits 0.

The test starts its own processes (2 ranks per case: torch.distributed over gloo
with a FileStore in a temp dir, ferry.init() on it), never torchrun's ranks:
torchrun ends every rank when one dies. It is skipped under torchrun (it would
hold the other ranks in their next collective for its minute; device_run.sh runs
it alone, stage python_faults) and without a GPU. Each case:
  - every rank makes a few good calls (checked), then a torch.distributed barrier;
  - the victim dies "before" the call under test (os.kill(SIGKILL) just before it)
    or "mid" call (a timer thread kills it 30 ms into the call, while it waits in
    the library with its kernels launched; the survivor joins 150 ms late, so the
    victim is dead by then, and may finish that call and fail in the next one);
  - the survivor calls until one raises (at most 4 rounds). It must be a
    ferry.Error, not AbortedError (it is the first), name the dead rank ("peer
    rank V", UCX's "to rank V", or "rank V is gone"), name the phase of the call
    that raised (across nodes the proxy's phases too), come within 3 x timeout
    + 2 s; the communicator must be aborted, the next call raise AbortedError,
    EpLayer.finalize() refuse (AbortedError) or return within 2 s (no collective
    with the dead rank); dropping everything must take under 2 x timeout + 10 s,
    and the interpreter must exit 0.
The parent fails a case on a hang (a process alive 150 s after the case started:
killed), a survivor crash or non-zero exit, or a victim that did not die by SIGKILL.

With 2 ranks the survivor's wait is on the dead rank, so its message names it
even though the torch callback bootstrap cannot tell which ranks are gone
(NOTE [Naming the dead rank], src/communicator.cpp); with 3 or more ranks a
survivor may wait on a live rank, which only bootstraps with a liveness probe
(TcpBootstrap, tests/gpu/test_killed_peer.cpp) can name.

Environment: FERRY_FAULT_TIMEOUT_MS (device timeout, default 3000),
FERRY_FAULT_PARALLEL (cases at once, default 3), FERRY_FAULT_CASES (only the
cases whose name contains this text).
"""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import ferry

GPU_SKIPPED_LINE = "FERRY PYTHON GPU TESTS SKIPPED"
TIMEOUT_MS = max(500, int(os.environ.get("FERRY_FAULT_TIMEOUT_MS", "3000")))
PARALLEL = max(1, int(os.environ.get("FERRY_FAULT_PARALLEL", "3")))
CASE_DEADLINE_S = 150
OK_LINE = "FERRY KILLED PEER SURVIVOR OK"
# torchrun's variables: a child must not think it is one of the parent's ranks.
_PARENT_LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                       "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT")

# name, op (allreduce | dispatch | combine), algorithm (allreduce) or EP mode, bytes (allreduce),
# when (before | mid), victim, FERRY_RANKS_PER_NODE (0: one node)
CASES = [
    ("ar_auto_4K_mid_v1", "allreduce", "auto", 4 << 10, "mid", 1, 0),
    ("ar_ring_256K_before_v0", "allreduce", "ring", 256 << 10, "before", 0, 0),
    ("ep_ht_dispatch_mid_v1", "dispatch", "high_throughput", 0, "mid", 1, 0),
    ("ep_ht_combine_before_v0", "combine", "high_throughput", 0, "before", 0, 0),
    ("ep_ll_dispatch_before_v1", "dispatch", "low_latency", 0, "before", 1, 0),
    ("ep_ll_combine_mid_v0", "combine", "low_latency", 0, "mid", 0, 0),
    ("ar_auto_256K_2x1_mid_v1", "allreduce", "auto", 256 << 10, "mid", 1, 1),
    ("ep_ht_dispatch_2x1_before_v0", "dispatch", "high_throughput", 0, "before", 0, 1),
    ("ep_ll_combine_2x1_mid_v1", "combine", "low_latency", 0, "mid", 1, 1),
]

PROGRAM = r"""
import datetime
import gc
import os
import re
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist

import ferry
from ferry._checks import current_stream

name, op, kind, nbytes, when = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
victim = int(os.environ["FERRY_KILL_VICTIM"])
timeout_ms = int(os.environ["FERRY_KILL_TIMEOUT_MS"])
across_nodes = os.environ.get("FERRY_RANKS_PER_NODE", "") not in ("", "0")
WHO = f"[{name} rank {rank}{' (victim)' if rank == victim else ''}]"


def say(msg):
    print(f"{WHO} {msg}", flush=True)


def fail(code, msg):
    say(f"FAILED: {msg}")
    sys.exit(code)


device_index = os.environ.get("FERRY_KILL_DEVICE")
device = torch.device("cuda", int(device_index) if device_index else rank % torch.cuda.device_count())
torch.cuda.set_device(device)
store = dist.FileStore(os.environ["FERRY_KILL_STORE"], world)
dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))
comm = ferry.init(timeout_ms=timeout_ms)


def sync():
    comm.synchronize(current_stream(device))


T, H, K, E = 64, 512, 2, 4 * world
if op == "allreduce":
    ar = ferry.AllReduce(comm, 1 << 20)
    x = torch.full((nbytes // 4,), float(rank + 1), device=device)
    want = float(world * (world + 1) // 2)

    def one_round(before, check=False):
        before("allreduce")
        y = ar.allreduce(x, algorithm=kind)
        sync()
        if check and not bool((y == want).all()):
            fail(19, f"a good allreduce gave {y[:4].tolist()} instead of {want}")
else:
    layer = ferry.EpLayer(comm, T, H, K, E, mode=kind)
    x = torch.zeros(T, H, dtype=torch.bfloat16, device=device)
    t = torch.arange(T).unsqueeze(1)
    idx = ((t + rank + torch.arange(K).unsqueeze(0) * (E // 2)) % E).to(device)
    w = torch.full((T, K), 0.5, device=device)

    def one_round(before, check=False):
        before("dispatch")
        output, weights, layout = layer.dispatch(x, idx, w)
        sync()
        before("combine")
        layer.combine(output, layout)  # the dispatch output stands in for the experts' output
        sync()

try:
    for _ in range(3):
        one_round(lambda call: None, check=True)
    torch.cuda.synchronize()
    dist.barrier()
except ferry.Error as e:
    fail(19, f"a good call failed: {e}")

if rank == victim:
    def die(call):
        if call != op:
            return
        if when == "before":
            say("SIGKILL before the call")
            os.kill(os.getpid(), signal.SIGKILL)
        say("SIGKILL 30 ms into the call")
        threading.Timer(0.03, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
    try:
        one_round(die)
    except ferry.Error as e:
        say(f"the call raised before SIGKILL: {e}")
    while True:
        time.sleep(1)

lagged = []
current = [op]


def lag(call):
    current[0] = call
    if when == "mid" and call == op and not lagged:
        lagged.append(1)
        time.sleep(0.15)


start = time.monotonic()
error = None
try:
    for i in range(4):
        one_round(lag)
except ferry.Error as e:
    error = e
took = time.monotonic() - start
if error is None:
    fail(10, "no error in 4 rounds after the victim died")
msg, aborted_first = str(error), isinstance(error, ferry.AbortedError)
say(f"{current[0]} raised {type(error).__name__} after {took:.2f} s: {msg}")
del error  # its traceback holds the failed round's tensors, and through them the layer
if aborted_first:
    fail(15, "the first error is an AbortedError")
named = re.search(rf"(peer rank {victim}|to rank {victim})(?![0-9])", msg) or \
    re.search(rf"ranks? ([0-9]+, )*{victim}(, [0-9]+)* (is|are) gone", msg)
if not named:
    fail(11, f"the error does not name the dead rank {victim}")
if re.search(rf"ranks? ([0-9]+, )*{rank}(, [0-9]+)* (is|are) gone", msg):
    fail(12, "the error calls this live rank gone")
phase = re.search(r"phase '([^']*)'", msg)
phase = phase.group(1) if phase else ""
fits = {"allreduce": phase.startswith("allreduce"), "dispatch": phase == "ep dispatch",
        "combine": phase == "ep combine"}[current[0]]
if across_nodes and phase in ("proxy transfer", "proxy quiet", "proxy fifo full", "wait_signal"):
    fits = True
if not fits:
    fail(13, f"the error names phase {phase!r}, not one of the {current[0]} call")
if took > 3 * timeout_ms / 1000 + 2:
    fail(14, f"the error came after {took:.2f} s (timeout {timeout_ms} ms)")
if not comm.aborted:
    fail(16, "the communicator is not aborted after the error")
try:
    one_round(lambda call: None)
    fail(16, "a call after the error did not raise")
except ferry.AbortedError:
    pass
except ferry.Error as e:
    fail(16, f"a call after the error raised {type(e).__name__}, not AbortedError: {e}")

t0 = time.monotonic()
if op != "allreduce":
    try:  # collective when healthy; on an aborted communicator it must refuse (or return) at once
        layer.finalize()
    except ferry.AbortedError:
        pass
    if time.monotonic() - t0 > 2:
        fail(17, f"EpLayer.finalize() after the error took {time.monotonic() - t0:.2f} s")
    del layer, x, idx, w
else:
    del ar, x
del comm
gc.collect()
torch.cuda.synchronize()
teardown = time.monotonic() - t0
say(f"teardown took {teardown:.2f} s")
if teardown > 2 * timeout_ms / 1000 + 10:
    fail(17, f"teardown took {teardown:.2f} s")
print("FERRY KILLED PEER SURVIVOR OK", flush=True)
"""


def _skip_reason():
    if "WORLD_SIZE" in os.environ:
        return "runs outside torchrun (scripts/device_run.sh stage python_faults): it starts its own processes"
    if torch.cuda.device_count() == 0:
        return f"{GPU_SKIPPED_LINE}: no CUDA GPU visible"
    return None


def _child_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in _PARENT_LAUNCH_VARS and not k.startswith("TORCHELASTIC_")}
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(ferry.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    env.pop("FERRY_RANKS_PER_NODE", None)
    env.update({k: str(v) for k, v in extra.items()})
    return env


class _Case:
    def __init__(self, tmp_path, spec):
        self.name, self.op, self.kind, self.nbytes, self.when, self.victim, self.per_node = spec
        self.started = time.monotonic()
        script = tmp_path / "killed_peer_program.py"
        if not script.exists():
            script.write_text(textwrap.dedent(PROGRAM))
        extra = dict(FERRY_KILL_VICTIM=self.victim, FERRY_KILL_TIMEOUT_MS=TIMEOUT_MS,
                     FERRY_KILL_STORE=tmp_path / f"store_{self.name}", WORLD_SIZE=2,
                     GLOO_SOCKET_IFNAME=os.environ.get("GLOO_SOCKET_IFNAME", "lo"))  # every rank on this host
        if "WORLD_SIZE" in os.environ:  # under torchrun: every child on this rank's GPU
            extra["FERRY_KILL_DEVICE"] = int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count()
        if self.per_node:
            # Kernels loaded eagerly across nodes, as device_run's python_nodes stage does
            # (docs/internode.md, "Lazy module loading").
            extra.update(FERRY_RANKS_PER_NODE=self.per_node, CUDA_MODULE_LOADING="EAGER")
        self.logs = [tmp_path / f"{self.name}_rank{r}.log" for r in range(2)]
        self.procs = []
        for r in range(2):
            with open(self.logs[r], "w") as log:
                self.procs.append(subprocess.Popen(
                    [sys.executable, str(script), self.name, self.op, self.kind, str(self.nbytes), self.when],
                    env=_child_env(RANK=r, **extra), stdout=log, stderr=subprocess.STDOUT))

    def done(self) -> bool:
        return all(p.poll() is not None for p in self.procs)

    def late(self) -> bool:
        return time.monotonic() - self.started > CASE_DEADLINE_S

    def failures(self):
        hung = [r for r, p in enumerate(self.procs) if p.poll() is None]
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        out = []
        for r, p in enumerate(self.procs):
            text = self.logs[r].read_text(errors="replace")
            tail = "\n".join(text.splitlines()[-30:])
            if r in hung:
                out.append(f"{self.name}: rank {r} still running {CASE_DEADLINE_S} s after the start (a hang)")
            elif r == self.victim:
                if p.returncode != -signal.SIGKILL:
                    out.append(f"{self.name}: the victim rank {r} exited {p.returncode}, not by SIGKILL\n{tail}")
            elif p.returncode != 0 or OK_LINE not in text:
                out.append(f"{self.name}: survivor rank {r} exited {p.returncode}\n{tail}")
        return out


def test_killed_peer_raises_names_the_dead_rank_and_exits_cleanly(tmp_path):
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    only = os.environ.get("FERRY_FAULT_CASES", "")
    todo = [c for c in CASES if only in c[0]]
    if not todo:
        pytest.skip("no case matches FERRY_FAULT_CASES")
    running, failures, t0 = [], [], time.monotonic()
    while todo or running:
        while todo and len(running) < PARALLEL:
            running.append(_Case(tmp_path, todo.pop(0)))
        time.sleep(0.1)
        for case in list(running):
            if case.done() or case.late():
                failures += case.failures()
                print(f"=== {case.name}: done after {time.monotonic() - case.started:.1f} s", flush=True)
                for r in range(2):
                    for line in case.logs[r].read_text(errors="replace").splitlines():
                        if line.startswith("["):
                            print(line, flush=True)
                running.remove(case)
    print(f"=== {len(CASES)} cases in {time.monotonic() - t0:.1f} s (timeout {TIMEOUT_MS} ms)", flush=True)
    assert not failures, "\n\n".join(failures)
