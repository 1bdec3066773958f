# Session 41 c5. run(kind nvidia-h200, carry [".deps"]), from a checkout of main (no 2- or 4-GPU kind was lent
# for c4). Correctness only, ranks sharing one H200 under MPS: the low-latency EP tests at 3, 4 and 8 ranks, where
# main's combine now stages every own partial again (own_partial_at_home_path: 2 ranks only). 4 ranks on 4 GPUs:
# c3's oah2_ep_np4 (the same code).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 400
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
M="mpirun --allow-run-as-root --bind-to none -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x FERRY_TEST_SHARE_GPUS=1"
call_build_dir build-device "ferry_gpu_tests"
T=build-device/tests/ferry_gpu_tests
F='Ep/EpMatrix.*ll*:Ep.LowLatency*:Ep.ZeroTokenRanks:Ep.Staged*:Ep.TokensWithoutExperts:Ep.SkewAll*:Ep.HandleReuse*'
for n in 3 4 8; do call_run shared_np$n 100 $M -np $n $T --gtest_filter="$F"; done
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/shared_*.log | head -12
echo quit | nvidia-cuda-mps-control
call_end
