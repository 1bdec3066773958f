export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=$OUT/x FERRY_QUICK_TAR=1 FERRY_QUICK_TAIL=40 scripts/device_quick.sh "ferry-bench ferry_gpu_tests" \
 '$M $B/tests/ferry_gpu_tests --gtest_filter="*Ep*" 2>&1 | grep -E "PASSED|FAILED|OK \]|passed|failed" | tail -8' \
 'source scripts/common.sh; ferry_export_env; ferry_setup >/dev/null; FERRY_EP_TRACE=1 ferry_device_cmake_args build-trace; cmake "${cmake_args[@]}" >/dev/null && cmake --build build-trace -j16 --target ferry-bench >/dev/null && $M build-trace/bench/ferry-bench ep --mode ll --no-nccl --csv "" --tokens 1,128 --dispatch-types bf16 > $OUT/trace_ll.log 2>&1; grep -E "^ll" $OUT/trace_ll.log; grep "rank 0" $OUT/trace_ll.log | tail -24' \
 'for n in 3 4 5 6 8 10; do echo "== combine recv blocks $n"; $M -x FERRY_EP_COMBINE_RECV_BLOCKS=$n $B/bench/ferry-bench ep --mode ht --layout expanded --dispatch-types bf16 --no-nccl --csv "" | grep -E "^ht"; done' \
 'for n in 5 6 7 8 10 12; do echo "== rank rows local blocks $n"; $M -x FERRY_EP_RANK_ROWS_LOCAL_BLOCKS=$n $B/bench/ferry-bench ep --mode ht --layout rank_rows --no-nccl --csv "" | grep -E "^ht.*dispatch"; done' \
 '$M $B/bench/ferry-bench ep --mode ll --tokens 128,512 --halves --csv $OUT/ll_s10.csv'
