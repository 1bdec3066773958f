# Session 20, call 2 (main d5cc75e = exp/ep-mapped-signals merged): where a low-latency EP call over UCX shared memory
# spends its time (ferry 56 us at T=1 against NCCL's 18 in c1), with the EP trace (NOTE [EP trace]) and
# `--stages --halves`; racecheck of the merged signals path over sm.
# run(kind nvidia-h100-x2, carry [".deps"]): bash docs/results/session20_2xH100/scripts/c2.sh 2>&1 | tail -80
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 420
ferry_nccl_library_path
FERRY_EP_TRACE=1 ferry_device_cmake_args build-trace; cmake "${cmake_args[@]}" > $CALL_DIR/cfg_trace.log 2>&1
cmake --build build-trace -j16 --target ferry-bench > $CALL_DIR/build_trace.log 2>&1 &
call_build_dir build-device "ferry-bench ferry_gpu_tests"
wait; grep " error" $CALL_DIR/build_trace.log | head; rm -f $CALL_DIR/cfg_trace.log $CALL_DIR/build_trace.log
echo "both built in $(call_elapsed) s"
M="mpirun --allow-run-as-root --bind-to none -np 2"; BT=build-trace/bench/ferry-bench; B=build-device/bench/ferry-bench
SM="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
for tok in 1 128; do
  call_run trace_sm_ll_$tok 60 $M $SM $BT ep --mode ll --layout expanded --tokens $tok --no-nccl
  grep -a "ferry ep trace" $CALL_DIR/trace_sm_ll_$tok.log | grep -a "rank 0 " | grep -a "epoch 50 " | head -40
  gzip -9 $CALL_DIR/trace_sm_ll_$tok.log
done
call_run stages_sm_ll 60 $M $SM -x NCCL_P2P_DISABLE=1 $B ep --mode ll --layout expanded --tokens 1,128 --stages --halves
grep -a -E "^(ll|ferry|nccl)|stage|half" $CALL_DIR/stages_sm_ll.log | head -40
call_run trace_nvl_ll_1 40 $M $BT ep --mode ll --layout expanded --tokens 1 --no-nccl
grep -a "ferry ep trace" $CALL_DIR/trace_nvl_ll_1.log | grep -a "rank 0 " | grep -a "epoch 50 " | head -30
gzip -9 $CALL_DIR/trace_nvl_ll_1.log
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_run san_racecheck_sm 120 $M $SM $SAN --tool racecheck --error-exitcode 86 build-device/tests/ferry_gpu_tests \
  --gtest_filter='Ep/EpMatrix.DispatchCombine/*bf16*:Ep.HandleReuse'
call_end
