# Session 15, call 3: where the low-latency call's fixed cost comes from. (1) ferry-bench latency with new cases:
# an event-record node between ops (what ferry-bench ep does), a 132x1024 grid, a shared-memory carveout switch;
# (2) the EP trace with the fused layout run twice in block 0 (trace builds only): a cold first pass against a
# warm second one, T=1 and T=128.
# run(kind nvidia-h100-x2, carry [".deps"]): bash docs/results/session15_2xH100/scripts/c3.sh 2>&1 | tail -80
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 300
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c; git log --oneline -1 2>/dev/null
ferry_nccl_library_path
( FERRY_EP_TRACE=1 ferry_device_cmake_args build-trace; cmake "${cmake_args[@]}" > $CALL_DIR/cfg_trace.log 2>&1 &&
  cmake --build build-trace -j14 --target ferry-bench > $CALL_DIR/build_trace.log 2>&1 || grep " error" $CALL_DIR/build_trace.log | head ) &
ferry_device_cmake_args build-device; cmake "${cmake_args[@]}" > $CALL_DIR/cfg.log 2>&1
cmake --build build-device -j16 --target ferry-bench > $CALL_DIR/build.log 2>&1 || grep " error" $CALL_DIR/build.log | head
wait; echo "built in $(call_elapsed) s"
M="mpirun --allow-run-as-root --bind-to none -np 2"; BT=build-trace/bench/ferry-bench
for r in 1 2; do call_run latency_$r 60 $M build-device/bench/ferry-bench latency --csv $CALL_DIR/latency_$r.csv; cat $CALL_DIR/latency_$r.log | tail -16; done
for tok in 1 128; do
  call_run trace_ll_$tok 40 $M $BT ep --mode ll --tokens $tok --no-nccl
  grep -a "ferry ep trace" $CALL_DIR/trace_ll_$tok.log | grep -a "rank 0 dispatch_send epoch 50 " | head -20
  grep -aE "^ll " $CALL_DIR/trace_ll_$tok.log
done
call_end
