# Session 47 c4. run(kind nvidia-h200-x2, carry [".deps", ".ab"]), ~400 s. Trees (scripts/ab_trees.sh pre=ed2393c
# new=main).
# 1. EpConfig::zero_copy_combine on 2 real GPUs (c3 ran on one shared H200): EpZeroCopy* and the rank-rows suites,
#    then rank rows without / with --zero-copy at 8 / 24 / 48 SMs, 3 rounds alternating, --check, NCCL beside.
# C4_ZC_ONLY=1 C4_TREES=new+ferry_gpu_tests C4_BUDGET=280: part 1 only (~290 s with the machine's start).
# 2. What c2 left open of NOTE [EP across nodes: aligned records] (main since 414b357): Ep* as 2x1 over cuda_ipc,
#    the tcp A/B pre / new in 3 rounds (c2's 1 round read combine 1.048).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 ${C4_BUDGET:-440}
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
call_build_trees ferry-bench ${C4_TREES:-pre new+ferry_gpu_tests}
M="mpirun --allow-run-as-root --bind-to none"
T=.ab/new/build/tests/ferry_gpu_tests
P="$ROOT/.ab/pre/build/bench/ferry-bench"
N="$ROOT/.ab/new/build/bench/ferry-bench"
call_virtual_nodes
call_run rr_2gpu 120 $M2 $T --gtest_filter="EpZeroCopy*:EpRankRowsCases*:EpOwnRowsFirst*"
for r in 1 2 3; do
  for zc in "" --zero-copy; do
    timeout 100 $M2 $N ep --mode ht --layout rank_rows --sms 8,24,48 --check --iters 30 --warmup 3 $zc \
      --csv $CALL_DIR/zc${zc:+_on}_$r.csv > $CALL_DIR/zc${zc:+_on}_$r.log 2>&1 || echo "zc round $r '$zc' failed"
  done
done
grep -h "check:" $CALL_DIR/zc*.log | sort | uniq -c
grep -h "^ht   rank_rows" $CALL_DIR/zc_3.log $CALL_DIR/zc_on_3.log
[ "${C4_ZC_ONLY:-0}" = 1 ] && { call_end; exit 0; }
call_run ipc_2x1 100 $M2 $IPC $T --gtest_filter="Ep*"
grep -a "FAILED  \]\|Failure\|Which is\|timed out" $CALL_DIR/*.log | head -12
call_ab tcp_ 3 $P $N "$TCP" ep --mode ht --aligned --iters 20 --warmup 3 --no-nccl
call_end
