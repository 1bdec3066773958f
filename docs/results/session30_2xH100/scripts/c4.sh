# Session 30, call 4 (run(kind nvidia-h100-x2, carry [".deps"])): the working tree = main + NOTE [EP staged low
# latency] (uncommitted at the call: the diff is committed right after it). Tests with the staged path on (the
# default): Ep* on 2 GPUs (the new Ep.StagedAndDirectLowLatencyAgree included), the low-latency cases with 3 and 8
# ranks sharing the GPUs, memcheck / racecheck / synccheck, --check; then A/B in one binary, FERRY_EP_LL_STAGED=0
# (base: the direct rows after the counts) against 1, NCCL in the same processes, low latency 3 rounds; if time,
# the staged path with 66 dispatch receive blocks against its default 88 (T=128, 2 rounds).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 470
call_build_dir build-device "ferry-bench ferry_gpu_tests"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests; B=build-device/bench/ferry-bench
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_run ep_np2 120 $M -np 2 $T --gtest_filter='Ep*'
grep -a -E "StagedAndDirect|FAILED" $CALL_DIR/ep_np2.log | head -8
for n in 3 8; do
  call_run shared_np$n 60 $M -np $n -x FERRY_TEST_SHARE_GPUS=1 $T \
    --gtest_filter='Ep/EpMatrix.*ll*:Ep.ZipfSkew:Ep.ZeroTokenRanks:Ep.*Bad*:Ep.StagedAndDirect*:Ep.LowLatency*'
done
SF='Ep.BadExpertIdOnOneRank:Ep/EpMatrix.*ll_*:Ep.LowLatencyGraphReplayWithNewRouting'
for tool in memcheck racecheck synccheck; do
  call_run $tool 60 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter="$SF"
done
call_run check 40 $M -np 2 $B ep --mode ll --tokens 1,128,512 --check --csv ''
grep -a -E "^ll |check" $CALL_DIR/check.log | head -12
w() { printf '#!/usr/bin/env bash\nexport %s\nexec %s "$@"\n' "$2" "$ROOT/$B" > $CALL_DIR/$1; chmod +x $CALL_DIR/$1; }
w base "FERRY_EP_LL_STAGED=0"; w new "FERRY_EP_LL_STAGED=1"
call_ab ll_ 3 $CALL_DIR/base $CALL_DIR/new "" ep --mode ll --tokens 1,128,512
w new_d66 "FERRY_EP_LL_STAGED=1 FERRY_EP_DISPATCH_RECV_BLOCKS=66"
[ "$(call_left)" -gt 100 ] && call_ab ll_d66_ 2 $CALL_DIR/new $CALL_DIR/new_d66 "" ep --mode ll --tokens 128
rm -f $CALL_DIR/base $CALL_DIR/new $CALL_DIR/new_d66
call_end
