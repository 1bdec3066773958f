# Session 47 c6 on one H200: run(kind nvidia-h200, carry [".deps", ".ab"]), ~330 s. CORRECTNESS SCALE ONLY (ranks share
# the GPU under MPS; the A/B below is a direction, not a figure). Trees (scripts/ab_trees.sh base=414b357 new=main
# pre=ed2393c plain=exp/plain-host-loads; only new and plain built):
# 1. new (main e1efcf0: combine() gives the zero-copy receive half all num_sms blocks): EpZeroCopy* and the
#    rank-rows cases on 2 shared ranks.
# 2. plain (the cross-node receive's row loads weak, not volatile): Ep* as 2x1 virtual nodes over sm on the one GPU
#    (fresh random inputs every round: stale host lines would show), then ep --check over sm, new / plain
#    alternating, 2 rounds (both ranks read host memory through the same PCIe link here).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 340
call_build_trees ferry-bench new+ferry_gpu_tests plain+ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
S="-x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x FERRY_TEST_SHARE_GPUS=1"
call_run zc_2shared 90 $M -np 2 $S .ab/new/build/tests/ferry_gpu_tests --gtest_filter="EpZeroCopy*:EpRankRowsCases*"
SM="$S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
call_run plain_sm_2x1 120 $M -np 2 $SM .ab/plain/build/tests/ferry_gpu_tests --gtest_filter="Ep*"
grep -a "FAILED  \]\|Failure\|Which is\|timed out" $CALL_DIR/*.log | head -12
call_ab plain_ 2 $ROOT/.ab/new/build/bench/ferry-bench $ROOT/.ab/plain/build/bench/ferry-bench "$SM" ep --aligned \
  --check --no-nccl --iters 40 --warmup 5
grep -h "check:" $CALL_DIR/ab/plain_*.log | sort | uniq -c
echo quit | nvidia-cuda-mps-control
call_end
