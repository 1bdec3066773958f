#!/usr/bin/env python3
"""Medians of an A/B's CSVs (scripts/ab_bench.sh allreduce or ep): per case (allreduce: impl, algorithm,
dtype, bytes; ep: mode, layout, op, tokens, SMs, with NCCL's time as its own "nccl" rows) the median
time over rounds of each side and new/base, then the range of new/base over ferry's rows.

    python3 scripts/ab_compare.py OUT_DIR [TAG]     (reads OUT_DIR/ab_<TAG>{base,new}_<round>.csv)

AB_LAYOUT_ALIAS="a=b" compares ep rows of layout a (e.g. rank_rows_own, a new option on the new side only)
with the other side's layout b.
"""
import collections
import csv
import glob
import os
import statistics
import sys


def main():
    folder, tag = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "")
    alias = dict(pair.split("=", 1) for pair in os.environ.get("AB_LAYOUT_ALIAS", "").split(",") if "=" in pair)
    times = collections.defaultdict(list)
    for path in glob.glob(f"{folder}/ab_{tag}*.csv"):
        side = "base" if "_base_" in path else "new"
        for row in csv.DictReader(open(path)):
            if "ferry_us" in row:  # ferry-bench ep
                layout = alias.get(row["layout"], row["layout"])
                case = ("%s %s" % (row["mode"], layout), row["op"], "T=%s sms=%s" % (row["tokens"], row["sms"]))
                for impl, column in (("ferry", "ferry_us"), ("nccl", "nccl_us")):
                    if row.get(column) not in (None, "", "-"):
                        times[(impl,) + case + (side,)].append(float(row[column]))
                continue
            key = (row["impl"], row["algorithm"], row["dtype"], int(row["bytes"]))
            times[key + (side,)].append(float(row["time_us"]))
    ratios = []
    for key in sorted({k[:4] for k in times}):
        if key + ("base",) not in times or key + ("new",) not in times:
            continue
        base, new = statistics.median(times[key + ("base",)]), statistics.median(times[key + ("new",)])
        ratios.append((key, new / base))
        if isinstance(key[3], str):  # an ep case
            print("%-6s %-12s %-14s %-16s base %9.2f  new %9.2f  new/base %.3f" % (*key[:4], base, new, new / base))
        else:
            print("%-6s %-10s %-5s %10d  base %9.2f  new %9.2f  new/base %.3f" % (*key, base, new, new / base))
    ferry = [r for k, r in ratios if k[0] == "ferry"]
    if ferry:
        print("ferry new/base: min %.3f max %.3f" % (min(ferry), max(ferry)))


if __name__ == "__main__":
    main()
