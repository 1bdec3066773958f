# Prepared in session 31 for a later session (NOT run). run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~500 s.
# Branch exp/layout-lookback, third form (NOTE [EP layout look-back]): c6's trace put main's two layout kernels and
# the branch's one kernel at the same end; the branch's tiles ended spread from 4.7 to 9.0 us. Suspect: the lower
# tiles' totals summed by a loop unrolled by 8 whose remainder ran one L2 round trip after another (c7's form also
# changed the polls to volatile loads and a fence and got worse, so this form keeps c2's acquire polls and only
# batches the loads, 16 in flight). If the spread goes, the layout kernel ends at ~5.5-6 us instead of main's
# 5.3 + 0.9 + 4.3 us: ~4 us off every high-throughput dispatch of more than 1024 tokens (rank rows fp8 ~128 us
# against issue 23's <= 125).
# Before (here): rm -rf .ab; for t in base:main new:exp/layout-lookback; do d=.ab/${t%%:*}; mkdir -p $d;
#   git archive ${t#*:} | tar -x -C $d; rm -rf $d/docs; done
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 570
call_base_new ferry_gpu_tests  # sets M, T, B, N, SAN (scripts/device_call.sh)
call_ab ht_ 3 $B $N "" ep --mode ht --sms 8,24,48 --route-ahead
grep -h "route ahead" $CALL_DIR/ab/ht_*.log | sort | uniq -c | head -12
call_run ep_np2 150 $M -np 2 $T --gtest_filter='Ep*'
LAYOUT='Ep.FusedAndSeparateLayoutAgree:Ep.BadExpertIds*:Ep.Route*:EpRankRowsCases.RouteAhead'
call_run shared_np4 90 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter="$LAYOUT"
for tool in memcheck racecheck synccheck; do
  call_run $tool 60 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T \
    --gtest_filter='Ep.BadExpertIdsAcrossLayoutBlocks:Ep.RouteReplacesTheLayout'
done
SM="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
call_run ep_sm 90 $M -np 2 $SM $T --gtest_filter='Ep*'
# If time is left: the trace of the new tree (stamps 14 / 15) in a later call, as c6.sh does.
call_end
