# Session 48 c3 on one H200: run(kind nvidia-h200, carry [".deps", ".ab"]), ~450 s. Trees (scripts/ab_trees.sh
# pre=ed2393c new=main). What session 47 left open of NOTE [EP across nodes: aligned records] that one GPU can
# answer, 2 virtual nodes sharing it under MPS (CORRECTNESS SCALE for anything PCIe- or NVLink-bound):
# 1. Ep* as 2x1 over cuda_ipc with GPU-memory windows (only its A/B had run);
# 2. the tcp A/B pre / new in 3 rounds (c2's single round on 2 GPUs read combine 1.048). tcp over loopback is bound
#    by the proxy's socket copies, not the GPU, so one GPU gives a direction for it; --no-nccl (NCCL refuses 2
#    ranks on one GPU).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 ${C3_BUDGET:-560}
call_build_trees ferry-bench pre new+ferry_gpu_tests
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
M="mpirun --allow-run-as-root --bind-to none -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
T=.ab/new/build/tests/ferry_gpu_tests
P="$ROOT/.ab/pre/build/bench/ferry-bench"
N="$ROOT/.ab/new/build/bench/ferry-bench"
call_virtual_nodes
call_run ipc_2x1 170 $M2 $IPC $T --gtest_filter="Ep*"
grep -a "FAILED  \]\|Failure\|Which is\|timed out" $CALL_DIR/ipc_2x1.log | head -12
CALL_MPIRUN="$M" call_ab tcp_ 3 $P $N "$TCP" ep --mode ht --aligned --iters 20 --warmup 3 --no-nccl
echo quit | nvidia-cuda-mps-control
call_end
