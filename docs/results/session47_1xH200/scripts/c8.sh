# Session 47 c8 on one H200: run(kind nvidia-h200, carry [".deps", ".ab"]), ~180 s. CORRECTNESS SCALE ONLY. Tree
# new = main 35c45a6 (the review mends: longer combine_input views refused): EpZeroCopy* and EpRankRowsCases* on 2
# ranks sharing the GPU under MPS.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c8 170
call_build_trees ferry_gpu_tests new
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
call_run zc_2shared 60 mpirun --allow-run-as-root --bind-to none -np 2 -x CUDA_MPS_PIPE_DIRECTORY \
  -x CUDA_MPS_LOG_DIRECTORY -x FERRY_TEST_SHARE_GPUS=1 .ab/new/build/tests/ferry_gpu_tests \
  --gtest_filter="EpZeroCopy*:EpRankRowsCases*"
grep -a "FAILED  \]\|Failure\|Which is\|timed out" $CALL_DIR/*.log | head -12
echo quit | nvidia-cuda-mps-control
call_end
