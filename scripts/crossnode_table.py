#!/usr/bin/env python3
"""Issue 24's table from the CSVs of scripts/device_crossnode.sh.

    python3 scripts/crossnode_table.py OUT_DIR

Rows: AllReduce bf16 (ferry's auto choice) and EP (expanded) against NCCL's
figures from the same processes, over shared memory and tcp (the default since session 27: UCX's zero-copy
puts, NOTE [tcp without UCX's peer-failure handling]; and tcp_pf: tcp with FERRY_UCX_PEER_FAILURE=1, UCX's
emulated puts, where that stage ran); EP over cuda_ipc
against the same shape over NVLink in one node; then the per-stage lines that
`ferry-bench ep --stages --halves` printed. A stage whose CSV is missing is left out.
"""
import csv
import os
import sys

TARGET_NCCL = 1.0      # ferry / NCCL speed, issue 24
TARGET_NVLINK = 0.5    # cuda_ipc / NVLink speed, issue 24


def rows(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def size_name(n):
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def ep_case(r):
    return f"{r['mode']} {r['op']} T={r['tokens']}"


def allreduce_lines(out, transport):
    data = rows(os.path.join(out, f"ar_{transport}.csv"))
    nccl = {r["bytes"]: float(r["time_us"]) for r in data if r["impl"] == "nccl"}
    lines = []
    for r in data:
        if r["impl"] != "ferry" or r["algorithm"] != "auto" or r["bytes"] not in nccl:
            continue
        ferry_us, nccl_us = float(r["time_us"]), nccl[r["bytes"]]
        lines.append((f"{transport:<8} AllReduce bf16 {size_name(int(r['bytes']))}", nccl_us, ferry_us,
                      nccl_us / ferry_us, TARGET_NCCL))
    return lines


def ep_lines(out, transport):
    lines = []
    for r in rows(os.path.join(out, f"ep_{transport}.csv")):
        if not r.get("nccl_us"):
            continue
        ferry_us, nccl_us = float(r["ferry_us"]), float(r["nccl_us"])
        lines.append((f"{transport:<8} EP {ep_case(r)}", nccl_us, ferry_us, nccl_us / ferry_us, TARGET_NCCL))
    return lines


def cuda_ipc_lines(out):
    nvlink = {ep_case(r): float(r["ferry_us"]) for r in rows(os.path.join(out, "ep_nvlink.csv"))}
    lines = []
    for r in rows(os.path.join(out, "ep_cuda_ipc.csv")):
        case = ep_case(r)
        if case not in nvlink:
            continue
        ferry_us = float(r["ferry_us"])
        lines.append((f"cuda_ipc EP {case} (vs NVLink)", nvlink[case], ferry_us, nvlink[case] / ferry_us,
                      TARGET_NVLINK))
    return lines


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    table = []
    transports = ("sm", "tcp", "tcp_pf")
    for transport in transports:
        table += allreduce_lines(out, transport)
    for transport in transports:
        table += ep_lines(out, transport)
    table += cuda_ipc_lines(out)
    print(f"{'case':<44} {'baseline us':>12} {'ferry us':>10} {'speed':>6}  target")
    for name, base_us, ferry_us, speed, target in table:
        mark = "met" if speed >= target else "not met"
        print(f"{name:<44} {base_us:12.1f} {ferry_us:10.1f} {speed:6.2f}  >= {target:.1f} {mark}")
    print("(baseline: NCCL in the same processes; for cuda_ipc, ferry inside one node over NVLink)")
    for transport in ("sm", "tcp", "tcp_pf", "cuda_ipc"):
        path = os.path.join(out, f"ep_{transport}.txt")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            split = [line.rstrip() for line in f if " stages (us" in line or " halves (us)" in line]
        if split:
            print(f"\nper-stage split over {transport}:")
            print("\n".join(split))


if __name__ == "__main__":
    main()
