# Session 36, c5. run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~400 s.
#   base = main c86c629; new = exp/staged-receiver-layout: c4's tree, the routing boxes written in 16-byte units
#   (c4's trace: the last block took 11 us at T=512 for 4-byte stores), each token's ids checked in registers, finer
#   trace points in the receive's layout (c4's trace: 5 us at T=1, 10 us at T=512 from the boxes to the layout).
# Before (here): scripts/ab_trees.sh base=main new=exp/staged-receiver-layout
# Ep* on new, memcheck of the reuse, bad-id and staged tests, A/B low latency 3 rounds (T=256: bf16 staged with the
# token layout), the EP trace of new at T=1 and 512.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 540
{ nvidia-smi -q | grep -iE "bus id|serial number"; } > $CALL_DIR/host.txt 2>&1
(FERRY_EP_TRACE=1 call_build_dir build-trace ferry-bench > $CALL_DIR/trace_build.txt 2>&1) &
call_base_new ferry_gpu_tests  # sets M, T, B, N, SAN
call_run ep_new 120 $M -np 2 $T --gtest_filter='Ep*'
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/ep_new.log | head -12
call_run memcheck 60 $M -np 2 $SAN --tool memcheck --error-exitcode 86 $T \
  --gtest_filter='Ep.HandleReuse:Ep.RouteAhead:Ep.BadExpertIdOnOneRank:Ep.StagedLowLatencyOnFewSms'
call_ab ll_ 3 $B $N "" ep --mode ll --tokens 1,128,256,512
wait; cat $CALL_DIR/trace_build.txt
BT=build-trace/bench/ferry-bench
for tok in 1 512; do
  call_run trace_fp8_$tok 40 $M -np 2 $BT ep --mode ll --tokens $tok --no-nccl --dispatch-types fp8
  grep -a "ferry ep trace" $CALL_DIR/trace_fp8_$tok.log | grep -a "rank 0 .* epoch 150 " | grep -av " span " | head -24
done
call_end
