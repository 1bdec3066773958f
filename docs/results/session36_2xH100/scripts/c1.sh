# Session 36, c1 (prepared in session 35 as next_staged_data_first.sh). run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~420 s.
#   base = main (bbb81a2's sources)
#   new  = exp/staged-data-first bda95c3 (the second form, 6492d3b, plus the test Ep.StagedLowLatencyOnFewSms):
#          the staged low-latency dispatch sends its rows (by source, token) before its layout; block 0 writes the
#          records (by source, slot), 4 tokens' routing loads in flight at a time, and releases them once per
#          destination (NOTE [EP staged low latency] there)
# Before (here): scripts/ab_trees.sh base=main new=main+docs/results/session35_2xH100/staged-data-first_bda95c3.patch
# (the branch as a patch on main bbb81a2's sources; branches may not survive the checkout)
# The staged tests and the ll fp8 matrix on new first; A/B low latency (fp8 staged by default) 2 rounds; Ep* on new;
# memcheck of the staged tests; A/B with bf16 staged too (FERRY_EP_LL_STAGED=1 on both sides), if time.
# If it wins: racecheck / synccheck of Ep.StagedAndDirect*, 3 ranks sharing the GPUs, then the bf16 rule
# (stages_low_latency_rows) by the second A/B.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 440
{ nvidia-smi -q | grep -iE "bus id|serial number"; } > $CALL_DIR/host.txt 2>&1
call_base_new ferry_gpu_tests  # sets M, T, B, N, SAN
S='Ep.StagedAndDirect*:Ep.StagedLowLatencyOnFewSms:Ep/EpMatrix.*ll_fp8*:Ep.BadExpert*'
call_run staged_tests 80 $M -np 2 $T --gtest_filter="$S"
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out\|Error" $CALL_DIR/staged_tests.log | head -12
call_ab ll_ 2 $B $N "" ep --mode ll --tokens 1,128,512
call_run ep_new 100 $M -np 2 $T --gtest_filter='Ep*'
call_run memcheck 50 $M -np 2 $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter='Ep.StagedAndDirect*'
call_ab llbf16s_ 1 $B $N "-x FERRY_EP_LL_STAGED=1" ep --mode ll --tokens 1,128,512 --dispatch-types bf16
call_end
