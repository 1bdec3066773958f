# Session 36, c2. run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~480 s.
#   base = main c86c629; new = exp/staged-receiver-layout 59792dc: the staged low-latency dispatch with no layout on
#   the sender's path (routing boxes of raw ids, rows by (source, token); every receive block lays every source out
#   in shared memory: NOTE [EP staged low latency], src/ep/staged_dispatch.cu).
# Before (here): scripts/ab_trees.sh base=main new=exp/staged-receiver-layout
# Tests on new (staged ones first, then Ep*, 3 and 8 ranks sharing the GPUs, sanitizers), --check, A/B low latency
# (fp8 staged by default, bf16 direct) 2 rounds, A/B with bf16 staged on both sides 1 round.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 560
{ nvidia-smi -q | grep -iE "bus id|serial number"; } > $CALL_DIR/host.txt 2>&1
call_base_new ferry_gpu_tests  # sets M, T, B, N, SAN
S='Ep.StagedAndDirect*:Ep.StagedLowLatencyOnFewSms:Ep/EpMatrix.*ll_fp8*:Ep.BadExpert*'
call_run staged_tests 90 $M -np 2 $T --gtest_filter="$S"
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out\|Error" $CALL_DIR/staged_tests.log | head -12
call_run check 40 $M -np 2 $N ep --mode ll --tokens 1,128,512 --check --csv ''
grep -ai "mismatch\|fail\|error" $CALL_DIR/check.log | head -5
call_ab ll_ 2 $B $N "" ep --mode ll --tokens 1,128,512
call_run ep_new 110 $M -np 2 $T --gtest_filter='Ep*'
for n in 3 8; do
  call_run shared_np$n 80 $M -np $n -x FERRY_TEST_SHARE_GPUS=1 $T \
    --gtest_filter='Ep/EpMatrix.*ll_fp8*:Ep.ZipfSkew:Ep.ZeroTokenRanks:Ep.BadExpert*:Ep.StagedAndDirect*'
done
for tool in memcheck racecheck synccheck; do
  call_run $tool 60 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T \
    --gtest_filter='Ep.StagedAndDirectLowLatencyAgree:Ep.BadExpertIdOnOneRank'
done
call_ab llbf16s_ 1 $B $N "-x FERRY_EP_LL_STAGED=1" ep --mode ll --tokens 1,128,512 --dispatch-types bf16
call_end
