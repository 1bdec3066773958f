# Session 48 c5 on one H200: run(kind nvidia-h200, carry [".deps", ".ab"]), ~420 s. Trees (scripts/ab_trees.sh
# base=main new=exp/ll-overlap-sm): the low-latency halves across nodes overlapped where every remote peer's landing
# is mapped (UCX shared memory), so the receive grid is resident while the send runs (session 46's trace: 6 us
# between the grids of a 93 us fp8 dispatch). 2 virtual nodes on the ONE GPU under MPS, over sm: Ep* (new), then the
# low-latency rows base / new, 3 rounds alternating, --check, --no-nccl. A DIRECTION ONLY (both ranks on one GPU and
# one PCIe link); landing needs the A/B on 2 GPUs.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 ${C5_BUDGET:-430}
call_build_trees ferry-bench base new+ferry_gpu_tests
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
M="mpirun --allow-run-as-root --bind-to none -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
call_virtual_nodes
call_run sm_2x1 200 $M2 $SM .ab/new/build/tests/ferry_gpu_tests --gtest_filter="Ep*"
grep -a "FAILED  \]\|Failure\|timed out" $CALL_DIR/sm_2x1.log | head -8
CALL_MPIRUN="$M" call_ab sm_ll_ 3 "$ROOT/.ab/base/build/bench/ferry-bench" "$ROOT/.ab/new/build/bench/ferry-bench" \
  "$SM" ep --mode ll --aligned --check --iters 30 --warmup 5 --no-nccl
grep -h "check:" $CALL_DIR/ab/*.log | sort | uniq -c
echo quit | nvidia-cuda-mps-control
call_end
