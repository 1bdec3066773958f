# Session 37 c1: session 36 prepared this (next_tagged_boxes.sh). base = main c7e5c8c; new = main + tagged-boxes_d3e89b5.patch.
# build, as session 36's c5.sh) to see where the receive's layout now starts.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 420
{ nvidia-smi -q | grep -iE "bus id|serial number"; } > $CALL_DIR/host.txt 2>&1
call_base_new ferry_gpu_tests  # sets M, T, B, N, SAN
call_run ep_new 100 $M -np 2 $T --gtest_filter='Ep*'
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/ep_new.log | head -12
call_ab ll_ 3 $B $N "" ep --mode ll --tokens 1,128,256,512
call_run check 40 $M -np 2 $N ep --mode ll --tokens 1,128,512 --route-ahead --check --csv ''
for n in 3 8; do
  call_run shared_np$n 60 $M -np $n -x FERRY_TEST_SHARE_GPUS=1 $T \
    --gtest_filter='Ep/EpMatrix.*ll*:Ep.ZeroTokenRanks:Ep.BadExpert*:Ep.Staged*'
done
call_run memcheck 40 $M -np 2 $SAN --tool memcheck --error-exitcode 86 $T \
  --gtest_filter='Ep.StagedLowLatencyOnFewSms:Ep.HandleReuse:Ep.BadExpertIdOnOneRank'
for tool in racecheck synccheck; do
  call_run $tool 40 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T \
    --gtest_filter='Ep.StagedLowLatencyOnFewSms:Ep.LowLatencyGraphReplayWithNewRouting'
done
call_end
