# Session 32, call 6 (run(kind nvidia-h100-x2, carry [".deps"]), ~220 s) on main 060889c+ (c2-c4 merged): the
# low-latency and matrix cases with 3 and 8 ranks sharing the 2 GPUs (NOTE [EP record once] with more
# destinations), then racecheck / synccheck on the low-latency matrix (the quantizer's new lane groups).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 200
call_build_dir build-device ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for n in 8 3; do
  call_run shared_np$n 70 $M -np $n -x FERRY_TEST_SHARE_GPUS=1 $T \
    --gtest_filter='Ep/EpMatrix.*ll*:Ep.StagedAndDirectLowLatencyAgree:Ep.ZipfSkew:Ep.ZeroTokenRanks:EpRankRowsCases.Skew*'
done
for tool in racecheck synccheck; do
  call_run $tool 40 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter='Ep/EpMatrix.*ll_fp8*'
done
call_end
