# Session 35, call 3. run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~560 s.
#   base = main 5b65460
#   new  = exp/pair-rounds (second form): the pair layout in rounds as kernels of their own, rolled (NOTE [EP pair
#          rounds]), for 129..1024 tokens at top-8; every other send kernel's SASS identical to base's (cuobjdump)
# Before (here): scripts/ab_trees.sh base=main new=exp/pair-rounds
# The layout tests on new, Ep* on new, memcheck / racecheck of the layout tests; A/B low latency 3 rounds.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 580
{ nvidia-smi -q | grep -iE "bus id|serial number"; } > $CALL_DIR/host.txt 2>&1
( FERRY_EP_TRACE=1 call_build_dir build-trace ferry-bench > $CALL_DIR/build_trace.txt 2>&1 ) &
call_base_new ferry_gpu_tests  # sets M, T, B, N, SAN
wait; cat $CALL_DIR/build_trace.txt
L='Ep.PairAndTokenLayoutsAgree:Ep.FusedAndSeparateLayoutAgree:Ep.BadExpert*:Ep.StagedAndDirect*'
call_run layout_tests 90 $M -np 2 $T --gtest_filter="$L"
call_ab ll_ 3 $B $N "" ep --mode ll --tokens 1,128,256,512,1024
call_run ep_new 120 $M -np 2 $T --gtest_filter='Ep*'
call_run memcheck 70 $M -np 2 $SAN --tool memcheck --error-exitcode 86 $T \
  --gtest_filter='Ep.PairAndTokenLayoutsAgree:Ep.BadExpertIdInLaterRounds'
call_run racecheck 70 $M -np 2 $SAN --tool racecheck --error-exitcode 86 $T \
  --gtest_filter='Ep.PairAndTokenLayoutsAgree:Ep.BadExpertIdInLaterRounds'
for tok in 512 256; do
  call_run trace_ll_$tok 40 $M -np 2 build-trace/bench/ferry-bench ep --mode ll --tokens $tok --no-nccl
  grep -a "ferry ep trace" $CALL_DIR/trace_ll_$tok.log | grep -a "rank 0 dispatch_send" | grep -av " span " | head -13
done
grep -a "FAILED\|Failure\|Expected\|Which is" $CALL_DIR/layout_tests.log | head -20
call_end
