# Session 41 c6. run(kind nvidia-h200, carry [".deps", ".ab"]), from a checkout of main, trees made by
#   scripts/ab_trees.sh clean=exp/oah-cleanup
# Correctness only (one H200, ranks sharing it under MPS): exp/oah-cleanup (own_staged and the 3+ rank branch of
# the low-latency combine's peer items removed; the 2-rank send kernel's SASS changed) on 2 and 3 ranks, and
# memcheck / racecheck / synccheck of the staged low-latency tests on 2 ranks. Its A/B needs 2 GPUs (next session).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 400
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
export CALL_MPIRUN="mpirun --allow-run-as-root --bind-to none -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x FERRY_TEST_SHARE_GPUS=1"
call_build_trees ferry_gpu_tests clean
T=.ab/clean/build/tests/ferry_gpu_tests
F='Ep/EpMatrix.*ll*:Ep.LowLatency*:Ep.ZeroTokenRanks:Ep.Staged*:Ep.TokensWithoutExperts:Ep.SkewAll*:Ep.HandleReuse*'
call_run ll_np2 90 $CALL_MPIRUN -np 2 $T --gtest_filter="$F"
call_run ll_np1 40 $CALL_MPIRUN -np 1 $T --gtest_filter="$F"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_run memcheck 50 $CALL_MPIRUN -np 2 -x FERRY_TIMEOUT_MS=120000 $SAN --tool memcheck --error-exitcode 86 $T \
  --gtest_filter='Ep.StagedLowLatencyOnFewSms:Ep.HandleReuse:Ep.LowLatencyGraphReplayWithNewRouting'
for tool in racecheck synccheck; do
  call_run $tool 50 $CALL_MPIRUN -np 2 -x FERRY_TIMEOUT_MS=120000 $SAN --tool $tool --error-exitcode 86 $T \
    --gtest_filter='Ep.StagedLowLatencyOnFewSms:Ep.LowLatencyGraphReplayWithNewRouting'
done
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/*.log | head -12
echo quit | nvidia-cuda-mps-control
call_end
