# Prepared in session 25 for the next session (NOT run; run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~420 s).
# The one-role combine with prefetches (NOTE [EP combine L2 prefetch], combine-l2-prefetch_7648be1.patch = branch
# exp/l2-prefetch-2, an experiment, not for main), variants in one build by FERRY_EP_PREFETCH="passes,meta":
#   passes 1 / 2 / 4: lane 0 asks the L2 for each row's next steps (2 KB of a row per step) with bulk prefetches
#   (cp.async.bulk.prefetch.L2: no registers), so the register loads find them there;
#   meta 1: lanes 0 and 1 ask L1 for the item's home token and top-k rows at once after the ticket.
#   0,0 is main's kernel (ptxas 40/152 bytes of spills); with passes 48/152; meta alone 40/152.
# Each variant: the one-role test (bitwise against two roles) and the restricted-SM test, memcheck; then 2 rounds
# of the combine at 8 / 24 / 48 SMs, variants interleaved, medians per variant.
# Before (here): scripts/ab_trees.sh pf=main+docs/results/session25_2xH100/combine-l2-prefetch_7648be1.patch
# A variant that wins by more than the rounds' spread: alone as its own patch (no env), its suite (as c3.sh) and
# the A/B against main before it merges.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 560
call_build_trees ferry-bench pf+ferry_gpu_tests
S=.ab/pf/build/bench/ferry-bench; T=.ab/pf/build/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none -np 2"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
VARIANTS="0,0 1,0 2,0 4,0 0,1 2,1"
for v in $VARIANTS; do
  call_run ok_${v/,/_} 40 $M -x FERRY_EP_PREFETCH=$v $T --gtest_filter='Ep.CombineOneRole*:EpRestrictedSms*'
done
call_run memcheck_2_1 40 $M -x FERRY_EP_PREFETCH=2,1 $SAN --tool memcheck --error-exitcode 86 $T \
  --gtest_filter='Ep.CombineOneRole*'
for round in 1 2; do
  for v in $VARIANTS; do
    [ "$(call_left)" -gt 20 ] || break 2
    $M -x FERRY_EP_PREFETCH=$v $S ep --mode ht --layout expanded --dispatch-types bf16 --sms 8,24,48 --no-nccl \
      --csv $CALL_DIR/pf_${v/,/_}_$round.csv > $CALL_DIR/pf_${v/,/_}_$round.log 2>&1 || echo "variant $v round $round failed"
  done
done
python3 - "$CALL_DIR" <<'PY' | tee $CALL_DIR/prefetch_table.txt
import csv, glob, os, statistics, sys
rows = {}
for path in glob.glob(os.path.join(sys.argv[1], "pf_*_*_*.csv")):
    variant = ",".join(os.path.basename(path).split("_")[1:3])
    for r in csv.DictReader(open(path)):
        if r["op"].startswith("combine"):
            rows.setdefault((variant, int(r["sms"])), []).append(float(r["ferry_us"]))
print("combine bf16 T=4096, median us over rounds (rounds); variant = passes ahead,meta (0,0: main's kernel)")
for variant in sorted({v for v, _ in rows}):
    cells = [f"{s} SMs {statistics.median(rows[(variant, s)]):8.1f} ({len(rows[(variant, s)])})"
             for s in (8, 24, 48) if (variant, s) in rows]
    print(f"{variant:>5}  " + "   ".join(cells))
PY
call_end
