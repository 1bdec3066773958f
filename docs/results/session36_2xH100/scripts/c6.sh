# Session 36, c6 (the last call of the session's device time). run(kind nvidia-h100-x2, carry [".deps", ".ab"]).
#   base = main c86c629; new = exp/staged-receiver-layout: c5's kernels, bf16 staged where its rows fit (c3-c5: the
#   combine after it read 1.013-1.029 of base's), and two changes aimed at that combine: the staged regions after
#   every other region (the combine's then sit at the offsets they have without staging), and each consumed staging
#   chunk's whole L2 lines discarded (no write-back of dead rows during the combine).
# Before (here): scripts/ab_trees.sh base=main new=exp/staged-receiver-layout
# Tests and sanitizers on new (the code to submit), A/B low latency 3 rounds, the LL figures with --check.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 330
{ nvidia-smi -q | grep -iE "bus id|serial number"; } > $CALL_DIR/host.txt 2>&1
call_base_new ferry_gpu_tests  # sets M, T, B, N, SAN
call_run ep_new 100 $M -np 2 $T --gtest_filter='Ep*'
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/ep_new.log | head -12
call_ab ll_ 3 $B $N "" ep --mode ll --tokens 1,128,256,512
call_run figures 40 $M -np 2 $N ep --mode ll --tokens 1,128,512 --route-ahead --check --csv ''
tail -14 $CALL_DIR/figures.log
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
