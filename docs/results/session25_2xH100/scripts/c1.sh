# Session 25, call 1: ran as prepared in session 24 (next_sweep.sh, below).
# Prepared in session 24 for the next session (NOT run; run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~430 s).
# The one-role combine's variants in ONE build (combine-one-role-sweep_db6a8ae.patch, branch exp/one-role-sweep-2,
# an experiment not for main): FERRY_EP_ONE_ROLE_VARIANT=threads,rows,ahead picks the one-role kernel's block
# size (1024 / 640 / 512 threads), rows in flight (NOTE [EP combine rows in flight]) and items ahead (NOTE [EP
# combine one role: items ahead]); 1024,0,0 is main's kernel (ptxas: 44/116 bytes of spills), the baseline here.
# ptxas spills (stores/loads): 640,0,0 0/0; 640,1,0 4/4; 512,*,* 0/0; 1024,0,1 152/164; 640,0,1 0/0; 640,1,1 108/104.
# (1024,1,* spill 800+ bytes: left out.) Each variant: its one-role tests and the restricted-SM test (the ticket
# order's progress), then 2 rounds of the combine at 8 / 24 / 48 SMs, variants interleaved, medians per variant.
# The two-role and low-latency kernels of this tree have rows in flight (c7's, PTX-identical).
# Before (here): scripts/ab_trees.sh sweep=main+docs/results/session24_2xH100/combine-one-role-sweep_db6a8ae.patch
# Then: the winner as its own patch (combine-one-role-640_e59e818.patch is 640,1,0; combine-items-ahead_36cbfc3
# is 1024,0,1), its suite, sanitizers and A/B against main before it merges.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_sweep 540
call_build_trees ferry-bench sweep+ferry_gpu_tests
S=.ab/sweep/build/bench/ferry-bench; T=.ab/sweep/build/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none -np 2"
VARIANTS="1024,0,0 640,0,0 640,1,0 512,0,0 512,1,0 1024,0,1 640,0,1 640,1,1 512,0,1 512,1,1"
for v in $VARIANTS; do
  call_run ok_${v//,/_} 40 $M -x FERRY_EP_ONE_ROLE_VARIANT=$v $T --gtest_filter='Ep.CombineOneRole*:EpRestrictedSms*'
done
for round in 1 2; do
  for v in $VARIANTS; do
    [ "$(call_left)" -gt 20 ] || break 2
    $M -x FERRY_EP_ONE_ROLE_VARIANT=$v $S ep --mode ht --layout expanded --dispatch-types bf16 --sms 8,24,48 \
      --no-nccl --csv $CALL_DIR/sweep_${v//,/_}_$round.csv > $CALL_DIR/sweep_${v//,/_}_$round.log 2>&1 ||
      echo "variant $v round $round failed"
  done
done
python3 - "$CALL_DIR" <<'PY' | tee $CALL_DIR/sweep_table.txt
import csv, glob, os, statistics, sys
rows = {}
for path in glob.glob(os.path.join(sys.argv[1], "sweep_*_*.csv")):
    variant = os.path.basename(path)[len("sweep_"):].rsplit("_", 1)[0].replace("_", ",")
    for r in csv.DictReader(open(path)):
        if r["op"].startswith("combine"):
            rows.setdefault((variant, int(r["sms"])), []).append(float(r["ferry_us"]))
print("combine bf16 T=4096, median us over rounds (rounds)   variant = threads,rows in flight,items ahead")
for variant in sorted({v for v, _ in rows}, key=lambda v: [int(x) for x in v.split(",")]):
    cells = [f"{s} SMs {statistics.median(rows[(variant, s)]):8.1f} ({len(rows[(variant, s)])})"
             for s in (8, 24, 48) if (variant, s) in rows]
    print(f"{variant:>10}  " + "   ".join(cells))
PY
call_end
