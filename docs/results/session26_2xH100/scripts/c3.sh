# Session 26, call 3 (run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~420 s): an experiment in one build (branch
# exp/pf-more; FERRY_EP_PF_EXP bit mask, 0 = main's kernels): the L2 prefetch of c1/c2 carried to other loops.
#   1: rank-rows dispatch send, the next item's token chunk (bulk prefetch) and routing lines
#   2: the expanded dispatch send, the same
#   4: rank-rows combine receive, both rows' next step
#   8: rank-rows combine send, the next item's source chunk
#  16: the rows-in-flight combine (two roles, low latency), each row's next step
# The Ep* suite with every bit on, then 2 rounds of each variant, interleaved (ferry alone; medians per variant).
# Before (here): scripts/ab_trees.sh pf=exp/pf-more
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 570
call_build_trees ferry-bench pf+ferry_gpu_tests
S=.ab/pf/build/bench/ferry-bench; T=.ab/pf/build/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none -np 2"
call_run ep_all_bits 120 $M -x FERRY_EP_PF_EXP=31 $T --gtest_filter='Ep*'
for round in 1 2; do
  for v in 0 7 11 15; do
    [ "$(call_left)" -gt 60 ] || break 2
    $M -x FERRY_EP_PF_EXP=$v $S ep --mode ht --sms 8,24 --no-nccl --csv $CALL_DIR/ht_${v}_$round.csv \
      > $CALL_DIR/ht_${v}_$round.log 2>&1 || echo "ht $v $round failed"
  done
  for v in 0 16; do
    [ "$(call_left)" -gt 30 ] || break 2
    $M -x FERRY_EP_PF_EXP=$v -x FERRY_EP_COMBINE_ONE_ROLE=0 $S ep --mode ht --layout expanded --dispatch-types bf16 \
      --sms 24 --no-nccl --csv $CALL_DIR/two_${v}_$round.csv > $CALL_DIR/two_${v}_$round.log 2>&1 || echo "two $v failed"
    $M -x FERRY_EP_PF_EXP=$v $S ep --mode ll --tokens 128,512 --no-nccl --csv $CALL_DIR/ll_${v}_$round.csv \
      > $CALL_DIR/ll_${v}_$round.log 2>&1 || echo "ll $v failed"
  done
done
python3 - "$CALL_DIR" <<'PY' | tee $CALL_DIR/pf_table.txt
import csv, glob, os, statistics, sys
rows = {}
for path in glob.glob(os.path.join(sys.argv[1], "*_*_*.csv")):
    kind, variant, _ = os.path.basename(path)[:-4].split("_")
    for r in csv.DictReader(open(path)):
        key = (kind, r["mode"], r["layout"], r["op"], r.get("dispatch_type", ""), r["tokens"], r["sms"])
        rows.setdefault(key, {}).setdefault(variant, []).append(float(r["ferry_us"]))
print("median us over rounds; FERRY_EP_PF_EXP variant (0 = main's kernels)")
for key in sorted(rows):
    cells = "  ".join(f"v{v} {statistics.median(x):8.2f} ({len(x)})" for v, x in sorted(rows[key].items(), key=lambda i: int(i[0])))
    base = statistics.median(rows[key]["0"]) if "0" in rows[key] else None
    ratios = "  ".join(f"{v}:{statistics.median(x) / base:.3f}" for v, x in sorted(rows[key].items(), key=lambda i: int(i[0])) if base and v != "0")
    print(" ".join(key), " | ", cells, " | ", ratios)
PY
call_end
