# Prepared in session 25 for the next session (NOT run; run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~330 s).
# The one-role combine with its rows prefetched into L2 ahead of the register loads (NOTE [EP combine L2 prefetch],
# combine-l2-prefetch_d2d78e2.patch, branch exp/l2-prefetch, an experiment): FERRY_EP_PREFETCH_PASSES = 0 (main's
# kernel), 1, 2 or 4 steps (2 KB of each row per step) ahead, in one build. ptxas: 48/152 bytes of spills with
# prefetch, 40/152 without. Each distance: the one-role test (bitwise against two roles), the restricted-SM test
# and memcheck; then 2 rounds of the combine at 8 / 24 / 48 SMs, distances interleaved, medians per distance.
# Before (here): scripts/ab_trees.sh pf=main+docs/results/session25_2xH100/combine-l2-prefetch_d2d78e2.patch
# If a distance wins by more than the rounds' spread: that distance alone as its own patch (no env), its suite
# (as c3.sh) and the A/B against main before it merges.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_prefetch 500
call_build_trees ferry-bench pf+ferry_gpu_tests
S=.ab/pf/build/bench/ferry-bench; T=.ab/pf/build/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none -np 2"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for d in 0 1 2 4; do
  call_run ok_$d 40 $M -x FERRY_EP_PREFETCH_PASSES=$d $T --gtest_filter='Ep.CombineOneRole*:EpRestrictedSms*'
  call_run memcheck_$d 40 $M -x FERRY_EP_PREFETCH_PASSES=$d $SAN --tool memcheck --error-exitcode 86 $T \
    --gtest_filter='Ep.CombineOneRole*'
done
for round in 1 2; do
  for d in 0 1 2 4; do
    [ "$(call_left)" -gt 20 ] || break 2
    $M -x FERRY_EP_PREFETCH_PASSES=$d $S ep --mode ht --layout expanded --dispatch-types bf16 --sms 8,24,48 \
      --no-nccl --csv $CALL_DIR/pf_${d}_$round.csv > $CALL_DIR/pf_${d}_$round.log 2>&1 || echo "distance $d round $round failed"
  done
done
python3 - "$CALL_DIR" <<'PY' | tee $CALL_DIR/prefetch_table.txt
import csv, glob, os, statistics, sys
rows = {}
for path in glob.glob(os.path.join(sys.argv[1], "pf_*_*.csv")):
    distance = int(os.path.basename(path).split("_")[1])
    for r in csv.DictReader(open(path)):
        if r["op"].startswith("combine"):
            rows.setdefault((distance, int(r["sms"])), []).append(float(r["ferry_us"]))
print("combine bf16 T=4096, median us over rounds (rounds); distance = steps prefetched ahead (0: main's kernel)")
for distance in sorted({d for d, _ in rows}):
    cells = [f"{s} SMs {statistics.median(rows[(distance, s)]):8.1f} ({len(rows[(distance, s)])})"
             for s in (8, 24, 48) if (distance, s) in rows]
    print(f"{distance:>3}  " + "   ".join(cells))
PY
call_end
