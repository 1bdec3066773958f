# Session 48 c4 on one H200: run(kind nvidia-h200, carry [".deps", ".ab"]), ~300 s. Tree new = main (c3's trees).
# c3 found low latency over cuda_ipc (2 virtual nodes on the ONE GPU, GPU-memory windows) timing out on the first
# dispatch, in the pre tree too. Is it CUDA's lazy module loading (docs/internode.md, "Lazy module loading")? The
# same with CUDA_MODULE_LOADING=EAGER: the bench's low-latency rows with --check, then Ep* over cuda_ipc.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 ${C4_BUDGET:-420}
call_build_trees ferry-bench new+ferry_gpu_tests
call_virtual_nodes
N=.ab/new/build/bench/ferry-bench
# Without MPS first (the ranks' kernels time-slice the GPU).
call_run ll_ipc_nomps 40 mpirun --allow-run-as-root --bind-to none -np 2 $IPC $N ep --mode ll --aligned --check \
  --no-nccl --iters 3 --warmup 1
grep -h "check:\|timed out" $CALL_DIR/ll_ipc_nomps.log | head -2
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
M="mpirun --allow-run-as-root --bind-to none -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
call_virtual_nodes
for loading in lazy eager; do
  call_run ll_ipc_$loading 40 $M2 $IPC -x CUDA_MODULE_LOADING=${loading^^} $N ep --mode ll --aligned --check \
    --no-nccl --iters 3 --warmup 1
  grep -h "check:\|timed out" $CALL_DIR/ll_ipc_$loading.log | head -2
done
call_run ipc_2x1_eager 200 $M2 $IPC -x CUDA_MODULE_LOADING=EAGER .ab/new/build/tests/ferry_gpu_tests \
  --gtest_filter="Ep*"
grep -a "FAILED  \]\|timed out" $CALL_DIR/ipc_2x1_eager.log | head -6
echo quit | nvidia-cuda-mps-control
call_end
