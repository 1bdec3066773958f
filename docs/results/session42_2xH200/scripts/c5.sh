# Session 42 c5. run(kind nvidia-h200-x2, carry [".deps"]), ~450 s, from a checkout of main (the working tree).
# The final main (e4611d7 and later: epoch tags merged) as one build on 2 real GPUs:
#   1. build (build-device); 2. the whole GPU suite, the window tests and the fault tests on 2 ranks;
#   3. ferry-bench allreduce --check and ep --check (default shapes) on 2 ranks, NCCL in the run.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 560
{ nvidia-smi -q | grep -iE "product name|bus id"; nvidia-smi topo -m; } > $CALL_DIR/host.txt 2>&1
M="mpirun --allow-run-as-root --bind-to none"
call_build_dir build-device "ferry-bench ferry_gpu_tests ferry_gpu_window_tests ferry_gpu_fault_tests"
N=$ROOT/build-device/bench/ferry-bench
call_run gpu_np2 150 $M -np 2 build-device/tests/ferry_gpu_tests
call_run window_np2 60 $M -np 2 build-device/tests/ferry_gpu_window_tests
call_run fault_np2 60 $M -np 2 build-device/tests/ferry_gpu_fault_tests
grep -a "FAILED\|Failure\|timed out" $CALL_DIR/*_np2.log | head -12
call_run bench_ar_np2 60 $M -np 2 $N allreduce --csv $CALL_DIR/allreduce_2xH200.csv --check
call_run bench_ep_np2 90 $M -np 2 $N ep --csv $CALL_DIR/ep_2xH200.csv --check
call_end
