export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
OUT=$OUT/x FERRY_QUICK_TAR=1 FERRY_QUICK_TAIL=30 scripts/device_quick.sh "ferry-bench ferry_gpu_tests ferry_gpu_window_tests" \
 'timeout 120 $M $V -x UCX_TLS=sm,self -x FERRY_TEST_EXPECT_MAPPED_PEERS=1 $B/tests/ferry_gpu_window_tests 2>&1 | tail -4' \
 'timeout 120 $M $V -x UCX_TLS=tcp,self $B/tests/ferry_gpu_window_tests 2>&1 | tail -3' \
 'timeout 240 $M $V -x UCX_TLS=sm,self $B/tests/ferry_gpu_tests --gtest_filter="*AllReduce*:Ep*:Timeout.Hier*" 2>&1 | grep -E "FAILED|PASSED|Error|error" | tail -12' \
 'for d in 1 0; do echo "== SHM_DIRECT=$d"; timeout 150 $M $V -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1 -x FERRY_UCX_SHM_DIRECT=$d $B/bench/ferry-bench allreduce --sizes 1M,16M,64M --dtypes bf16 --csv $OUT/ar_sm_$d.csv | grep -E "^ *(bf16|[0-9])" | tail -6; timeout 200 $M $V -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1 -x FERRY_UCX_SHM_DIRECT=$d $B/bench/ferry-bench ep --csv $OUT/ep_sm_$d.csv | grep -E "^(ht|ll)"; done' \
 'source scripts/common.sh; ferry_export_env; ferry_setup >/dev/null; FERRY_EP_TRACE=1 ferry_device_cmake_args build-trace; cmake "${cmake_args[@]}" >/dev/null && cmake --build build-trace -j16 --target ferry-bench >/dev/null && timeout 120 $M $V -x UCX_TLS=sm,self build-trace/bench/ferry-bench ep --mode ll --no-nccl --csv "" --dispatch-types bf16 > $OUT/trace_ll_sm.log 2>&1; grep -E "^ll" $OUT/trace_ll_sm.log; grep "rank 0" $OUT/trace_ll_sm.log | tail -30'
