# Session 31, call 7 (run(kind nvidia-h100-x2, carry [".deps", ".ab"])). exp/layout-lookback after c6's trace:
# relaxed polls then one fence, 16 loads in flight for the lower tiles' totals. Before (here): rm -rf .ab; for t in
#   base:main new:exp/layout-lookback; do d=.ab/${t%%:*}; mkdir -p $d; git archive ${t#*:} | tar -x -C $d;
#   rm -rf $d/docs; done
# The layout tests and the restricted-SM test on the new tree, then the high-throughput A/B at 24 SMs (2 rounds).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c7 300
call_build_trees ferry-bench base new+ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/new/build/tests/ferry_gpu_tests
B=$ROOT/.ab/base/build/bench/ferry-bench; N=$ROOT/.ab/new/build/bench/ferry-bench
call_run layout_np2 60 $M -np 2 $T \
  --gtest_filter='Ep.FusedAndSeparateLayoutAgree:Ep.BadExpertIds*:Ep.Route*:EpRestrictedSms.*:EpRankRowsCases.RouteAhead'
call_ab ht_ 2 $B $N "" ep --mode ht --sms 24 --route-ahead
grep -h "route ahead" $CALL_DIR/ab/ht_*.log | sort | uniq -c | head -8
call_end
