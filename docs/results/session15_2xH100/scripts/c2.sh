# Session 15, call 2: (1) where a low-latency call's time goes: the EP trace (NOTE [EP trace], now with each
# launch's span in %globaltimer so the halves and successive calls align) at T=1 and T=128; (2) the cross-node
# suites on the re-applied range-choice cleanup (94e96bc): Ep* over sm, tcp, cuda_ipc as 2x1 and over sm as 2x2.
# run(kind nvidia-h100-x2, carry [".deps"]): bash docs/results/session15_2xH100/scripts/c2.sh 2>&1 | tail -60
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 420
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c; git log --oneline -1 2>/dev/null
ferry_nccl_library_path
( FERRY_EP_TRACE=1 ferry_device_cmake_args build-trace; cmake "${cmake_args[@]}" > $CALL_DIR/cfg_trace.log 2>&1 &&
  cmake --build build-trace -j12 --target ferry-bench > $CALL_DIR/build_trace.log 2>&1 || grep " error" $CALL_DIR/build_trace.log | head ) &
ferry_device_cmake_args build-device; cmake "${cmake_args[@]}" > $CALL_DIR/cfg.log 2>&1
cmake --build build-device -j20 --target ferry_gpu_tests > $CALL_DIR/build.log 2>&1 || grep " error" $CALL_DIR/build.log | head
wait; echo "built in $(call_elapsed) s"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests; BT=build-trace/bench/ferry-bench
for tok in 1 128; do
  call_run trace_ll_$tok 40 $M -np 2 $BT ep --mode ll --tokens $tok --no-nccl
  grep -a "ferry ep trace" $CALL_DIR/trace_ll_$tok.log | grep -a "rank 0" | head -80
  grep -aE "^ll " $CALL_DIR/trace_ll_$tok.log
done
S="-x FERRY_TEST_SHARE_GPUS=1"; XN="Ep*"
call_run 2x1_sm 80 $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self $T --gtest_filter="$XN"
call_run 2x1_ipc 80 $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0 $T --gtest_filter="$XN"
call_run 2x2 100 $M -np 4 $S -x FERRY_RANKS_PER_NODE=2 $T --gtest_filter="$XN"
call_run 2x1_tcp 100 $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=tcp,self $T --gtest_filter="$XN"
call_end
