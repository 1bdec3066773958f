# Session 51 c2 on one H200: run(kind nvidia-h200, carry [".deps"]), ~560 s, from a checkout of main (library code
# unchanged since session 49's d7d294f). The final main as one build on the one GPU, ranks sharing it under MPS
# (FERRY_TEST_SHARE_GPUS=1): CORRECTNESS ONLY. 1. build; 2. the whole GPU suite on 2 ranks of one node, the window
# and fault tests; 3. Ep* and *AllReduce* as 2 virtual nodes over UCX shared memory and tcp; the low-latency tests
# on 4 and 8 ranks; 4. ferry-bench allreduce / ep --check on 2 ranks (--no-nccl: NCCL refuses two ranks on a GPU);
# 5. memcheck of small EP cases as 2x1 over shared memory.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 ${C2_BUDGET:-560}
call_build_dir build-device "ferry-bench ferry_gpu_tests ferry_gpu_window_tests ferry_gpu_fault_tests"
T=$ROOT/build-device/tests N=$ROOT/build-device/bench/ferry-bench
call_mps_start 2
call_virtual_nodes
ONE="-x FERRY_TEST_SHARE_GPUS=1"
call_run gpu_np2 200 $M2 $ONE $T/ferry_gpu_tests
call_run window_np2 60 $M2 $ONE $T/ferry_gpu_window_tests
call_run nodes_2x1_sm 120 $M2 $SM $T/ferry_gpu_tests --gtest_filter="Ep*:*AllReduce*"
call_run nodes_2x1_tcp 120 $M2 $TCP $T/ferry_gpu_tests --gtest_filter="Ep*:*AllReduce*"
LL_TESTS="Ep.LowLatency*:Ep/EpMatrix.*ll*:Ep.Staged*:Ep.ZeroTokenRanks"
for n in 4 8; do
  call_run ll_np$n 90 ${M:-mpirun --allow-run-as-root --bind-to none} -np $n $ONE $T/ferry_gpu_tests \
    --gtest_filter="$LL_TESTS"
done
call_run bench_ar_np2 40 $M2 $ONE $N allreduce --check --no-nccl --iters 20 --warmup 3
call_run bench_ep_np2 60 $M2 $ONE $N ep --check --no-nccl --iters 10 --warmup 2
call_run memcheck_2x1_sm 90 $M2 $SM compute-sanitizer --tool memcheck --error-exitcode 86 $T/ferry_gpu_tests \
  --gtest_filter="Ep.LowLatencyGraphReplayWithNewRouting:Ep.TokensWithoutExperts:Ep.ZeroTokenRanks"
call_mps_stop
call_run fault 90 $T/ferry_gpu_fault_tests
grep -a "FAILED  \]\|Failure\|timed out\|check:\|ERROR SUMMARY" $CALL_DIR/*.log | grep -v "fault.log.*timed out" |
  head -20
call_end
