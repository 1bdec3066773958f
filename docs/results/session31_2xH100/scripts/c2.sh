# Session 31, call 2 (run(kind nvidia-h100-x2, carry [".deps", ".ab"])). Issue 23, the high-throughput layout step
# (~11 us of every dispatch of more than 1024 tokens: rank rows fp8 128.2 us against <= 125, routed 117.2): branch
# exp/layout-lookback (NOTE [EP layout look-back]): the layout of several tiles in ONE kernel, each tile adding the
# lower tiles' totals after acquiring their ready words (tiles from a ticket), instead of a second kernel that did
# it (layout_add_lower_blocks, 6.5 us at ncu's locked clocks, session 23, plus its launch). Every other EP kernel's
# SASS is identical to main's. Before (here): rm -rf .ab; for t in base:main new:exp/layout-lookback; do
#   d=.ab/${t%%:*}; mkdir -p $d; git archive ${t#*:} | tar -x -C $d; rm -rf $d/docs; done
# Tests on the new tree: Ep* on 2 GPUs (FusedAndSeparateLayoutAgree: 1025 / 4097 tokens through the kernel; the
# restricted-SM test now lays out 6 tiles on one free SM), the layout tests on 4 ranks sharing the GPUs, memcheck /
# racecheck / synccheck of the multi-tile tests, Ep* as 2x1 over sm (the cross-node path always runs the layout
# kernel); then A/B base against new, NCCL beside, high throughput at 8 / 24 / 48 SMs with the route timed.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 570
call_build_trees ferry-bench base new+ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/new/build/tests/ferry_gpu_tests
B=$ROOT/.ab/base/build/bench/ferry-bench; N=$ROOT/.ab/new/build/bench/ferry-bench
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_run ep_np2 150 $M -np 2 $T --gtest_filter='Ep*'
grep -a -E "FusedAndSeparate|BadExpertIdsAcross|RestrictedSms|free SMs|FAILED" $CALL_DIR/ep_np2.log | head -12
LAYOUT='Ep.FusedAndSeparateLayoutAgree:Ep.BadExpertIds*:Ep.Route*:EpRankRowsCases.RouteAhead'
call_run shared_np4 90 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter="$LAYOUT"
call_ab ht_ 3 $B $N "" ep --mode ht --sms 8,24,48 --route-ahead
grep -h "route" $CALL_DIR/ab/ht_*.log | sort | uniq -c | head -12
for tool in memcheck racecheck synccheck; do
  call_run $tool 90 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T \
    --gtest_filter='Ep.BadExpertIdsAcrossLayoutBlocks:Ep.RouteReplacesTheLayout'
done
SM="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
call_run ep_sm 90 $M -np 2 $SM $T --gtest_filter='Ep*'
call_end
