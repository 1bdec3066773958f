# Prepared in session 15 for the next one (not run): where the ~6.5 us between low-latency ops go. The EP trace's
# receive kernels now stamp the moment the send grid is complete (dispatch_recv point 4, combine_recv point 2, trace
# builds only), so each op splits into: send items done -> send grid complete (its last blocks' arrivals and the
# flush of its NVLink stores) -> receive report -> next op's first block (the receive grid's own arrival and
# completion, the event node ~0.7 us, the launch ~1 us).
# run(kind nvidia-h100-x2, carry [".deps"]): bash docs/results/session15_2xH100/scripts/next_trace.sh 2>&1 | tail -60
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin trace 200
ferry_nccl_library_path
FERRY_EP_TRACE=1 ferry_device_cmake_args build-trace; cmake "${cmake_args[@]}" > $CALL_DIR/cfg_trace.log 2>&1
cmake --build build-trace -j30 --target ferry-bench > $CALL_DIR/build_trace.log 2>&1 || grep " error" $CALL_DIR/build_trace.log | head
rm -f $CALL_DIR/cfg_trace.log $CALL_DIR/build_trace.log; echo "built in $(call_elapsed) s"
M="mpirun --allow-run-as-root --bind-to none -np 2"; BT=build-trace/bench/ferry-bench
for tok in 1 128; do
  call_run trace_ll_$tok 40 $M $BT ep --mode ll --tokens $tok --no-nccl
  grep -a "ferry ep trace" $CALL_DIR/trace_ll_$tok.log | grep -a "rank 0" | grep -aE "epoch (4[6-9]|50) " | head -40
  gzip -9 $CALL_DIR/trace_ll_$tok.log
done
call_end
