"""scripts/crossnode_table.py: issue 24's table from the CSVs of scripts/device_crossnode.sh.

Fresh random times each run; the table's speeds and verdicts are checked
against the same arithmetic done here, and a missing stage is left out.
"""
import csv
import os
import random
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "crossnode_table.py")
AR_FIELDS = ["op", "dtype", "bytes", "world_size", "impl", "algorithm", "time_us", "busbw_gbps", "speedup_vs_nccl"]
EP_FIELDS = ["mode", "layout", "op", "world_size", "tokens", "ferry_us", "nccl_us"]


def write(path, fields, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


class CrossnodeTable(unittest.TestCase):
    def run_table(self, out):
        return subprocess.run([sys.executable, SCRIPT, out], check=True, capture_output=True, text=True).stdout

    def test_speeds_and_verdicts(self):
        rng = random.Random()
        with tempfile.TemporaryDirectory() as out:
            nccl_us, ferry_us = rng.uniform(50, 100), rng.uniform(20, 200)
            write(os.path.join(out, "ar_sm.csv"), AR_FIELDS, [
                {"op": "allreduce", "dtype": "bf16", "bytes": 1 << 20, "world_size": 2, "impl": "ferry",
                 "algorithm": "auto", "time_us": ferry_us},
                {"op": "allreduce", "dtype": "bf16", "bytes": 1 << 20, "world_size": 2, "impl": "ferry",
                 "algorithm": "hierarchical", "time_us": ferry_us * 2},  # not the auto row: left out
                {"op": "allreduce", "dtype": "bf16", "bytes": 1 << 20, "world_size": 2, "impl": "nccl",
                 "algorithm": "", "time_us": nccl_us}])
            ep_nccl, ep_ferry = rng.uniform(1000, 3000), rng.uniform(1000, 3000)
            write(os.path.join(out, "ep_sm.csv"), EP_FIELDS, [
                {"mode": "ht", "layout": "expanded", "op": "dispatch bf16", "world_size": 2, "tokens": 4096,
                 "ferry_us": ep_ferry, "nccl_us": ep_nccl}])
            nvlink, ipc = rng.uniform(200, 500), rng.uniform(400, 2000)
            write(os.path.join(out, "ep_nvlink.csv"), EP_FIELDS, [
                {"mode": "ht", "layout": "expanded", "op": "combine bf16", "world_size": 2, "tokens": 4096,
                 "ferry_us": nvlink, "nccl_us": ""}])
            write(os.path.join(out, "ep_cuda_ipc.csv"), EP_FIELDS, [
                {"mode": "ht", "layout": "expanded", "op": "combine bf16", "world_size": 2, "tokens": 4096,
                 "ferry_us": ipc, "nccl_us": ""}])
            pf_nccl, pf_ferry = rng.uniform(100, 900), rng.uniform(100, 900)
            write(os.path.join(out, "ar_tcp_pf.csv"), AR_FIELDS, [
                {"op": "allreduce", "dtype": "bf16", "bytes": 256 << 10, "world_size": 2, "impl": "ferry",
                 "algorithm": "auto", "time_us": pf_ferry},
                {"op": "allreduce", "dtype": "bf16", "bytes": 256 << 10, "world_size": 2, "impl": "nccl",
                 "algorithm": "", "time_us": pf_nccl}])
            table = self.run_table(out).splitlines()

        def line(prefix):
            found = [l for l in table if l.startswith(prefix)]
            self.assertEqual(len(found), 1, f"{prefix!r} in\n" + "\n".join(table))
            words = found[0].split()
            at = words.index(">=")
            return float(words[at - 1]), float(words[at + 1]), " ".join(words[at + 2:])

        for prefix, speed, target in (("sm       AllReduce bf16 1M", nccl_us / ferry_us, 1.0),
                                      ("sm       EP ht dispatch bf16 T=4096", ep_nccl / ep_ferry, 1.0),
                                      ("cuda_ipc EP ht combine bf16 T=4096", nvlink / ipc, 0.5),
                                      ("tcp_pf   AllReduce bf16 256K", pf_nccl / pf_ferry, 1.0)):
            printed, printed_target, verdict = line(prefix)
            self.assertAlmostEqual(printed, speed, places=2)
            self.assertEqual(printed_target, target)
            self.assertEqual(verdict, "met" if speed >= target else "not met")
        self.assertFalse(any(l.startswith("tcp ") for l in table), "tcp had no CSV: left out")

    def test_empty_directory_prints_only_the_heading(self):
        with tempfile.TemporaryDirectory() as out:
            table = self.run_table(out).splitlines()
        self.assertEqual(len(table), 2)
        self.assertTrue(table[0].startswith("case"))


if __name__ == "__main__":
    unittest.main()
