# Session 48 c2 on one H200, right after c1 on the warm machine: run(kind nvidia-h200), no carry (c1's built trees
# stay), ~400 s. CORRECTNESS SCALE ONLY. memcheck / racecheck / synccheck on the new zero-copy tests, 2 shared ranks.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 420
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
M="mpirun --allow-run-as-root --bind-to none"
S="-x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x FERRY_TEST_SHARE_GPUS=1"
SAN="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer) --print-limit 10"
NEW=.ab/new/build/tests/ferry_gpu_tests
call_run memcheck 150 $M -np 2 $S $SAN --tool memcheck --error-exitcode 9 $NEW \
  --gtest_filter="EpZeroCopyCombine.HeldBackRank:EpZeroCopyCombine.Bad*:EpZeroCopyCombine.RecvRows*"
for tool in racecheck synccheck; do
  call_run $tool 120 $M -np 2 $S $SAN --tool $tool --error-exitcode 9 $NEW \
    --gtest_filter="EpZeroCopyCombine.Bad*:EpZeroCopyCombine.RecvRows*"
done
grep -a "FAILED  \]\|Failure\|ERROR SUMMARY\|RACECHECK SUMMARY\|timed out" $CALL_DIR/*.log | head -12
echo quit | nvidia-cuda-mps-control
call_end
