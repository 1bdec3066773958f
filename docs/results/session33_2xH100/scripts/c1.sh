# Session 33 c1 = session 32's next_counts_rows.sh, run as prepared (exp/counts-into-rows rebased on main 67fbae3 -> ca5551d).
# Branch exp/counts-into-rows (NOTE [EP counts into rows], destination_rows.cuh): the direct dispatch's send kernel
# adds each count into its block's DestinationRows sums as it acquires the tagged word, so the blocks no longer load
# every rank's counts again after the wait (one L2 round trip before the first row moves; session 30's trace:
# destination rows 1.5 us of a low-latency dispatch). Only the four dispatch_send_kernel instantiations change
# (cuobjdump; each 370-770 SASS instructions shorter), no spills. Expected ~0.3-0.7 us off every low-latency dispatch.
# Before (here): scripts/ab_trees.sh base=main new=exp/counts-into-rows
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_counts_rows 570
call_base_new ferry_gpu_tests  # sets M, T, B, N, SAN (scripts/device_call.sh)
LL='Ep.StagedAndDirectLowLatencyAgree:Ep.LowLatency*:Ep.SkewAllTokensToOneExpertOrOneRank'
call_run ll_np2 90 $M -np 2 $T --gtest_filter="$LL"
call_ab ll_ 4 $B $N "" ep --mode ll --tokens 1,128,512
call_ab ht_ 2 $B $N "" ep --mode ht --sms 8,24 --layout expanded
call_run check_new 60 $M -np 2 $N ep --tokens 1,128,4096 --check --csv ''
call_run ep_np2 150 $M -np 2 $T --gtest_filter='Ep*'
for n in 8 3; do
  call_run shared_np$n 70 $M -np $n -x FERRY_TEST_SHARE_GPUS=1 $T \
    --gtest_filter='Ep/EpMatrix.*ll*:Ep.StagedAndDirectLowLatencyAgree:Ep.ZipfSkew:Ep.ZeroTokenRanks:EpRankRowsCases.Skew*'
done
for tool in memcheck racecheck synccheck; do
  call_run $tool 60 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter='Ep/EpMatrix.*ll_bf16*'
done
call_end
