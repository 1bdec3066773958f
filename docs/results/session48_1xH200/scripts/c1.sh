# Session 48 c1 on one H200 (only nvidia-h200 was lent): run(kind nvidia-h200, carry [".deps", ".ab"]), ~560 s.
# CORRECTNESS SCALE ONLY (ranks share the GPU under MPS). Trees (scripts/ab_trees.sh): new = main with the zero-copy
# combine's held-back-rank, bad-id and overflow tests; nobar = new + mutant_no_end_barrier.patch (the receive half
# returns without waiting for the peers' "consumed"); stale = new + mutant_stale_ready.patch (it takes the previous
# call's ready words). The new tests must pass on 2, 3 and 4 shared ranks and fail on both mutants.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 560
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
call_build_trees ferry_gpu_tests new nobar stale
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
M="mpirun --allow-run-as-root --bind-to none"
S="-x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x FERRY_TEST_SHARE_GPUS=1"
NEW=.ab/new/build/tests/ferry_gpu_tests
call_run rr_2shared 170 $M -np 2 $S $NEW --gtest_filter="EpZeroCopy*:EpRankRowsCases*:EpOwnRowsFirst*"
call_run zc_3shared 90 $M -np 3 $S $NEW --gtest_filter="EpZeroCopy*"
call_run zc_4shared 90 $M -np 4 $S $NEW --gtest_filter="EpZeroCopyCombine.HeldBackRank:EpZeroCopyCombine.Bad*"
for tree in nobar stale; do
  call_run mutant_$tree 60 $M -np 2 $S .ab/$tree/build/tests/ferry_gpu_tests \
    --gtest_filter="EpZeroCopyCombine.HeldBackRank"
  grep -a "held back\|Failure" $CALL_DIR/mutant_$tree.log | sort | uniq -c | head -8
done
grep -a "FAILED  \]\|Failure\|Which is\|timed out" $CALL_DIR/rr_*.log $CALL_DIR/zc_*.log | head -12
echo quit | nvidia-cuda-mps-control
call_end
