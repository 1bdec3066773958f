# Session 27 c6. run(kind nvidia-h100-x2, carry [".deps"]): main a16d064 (the merged kernels; c5 ran its 2-rank
# combine only in the bench). The 2-rank one-role combine and the pair layout's tests on 2 GPUs, in what device
# time was left.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 170
call_build_dir build-device "ferry_gpu_tests"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests
call_run ep_np2 60 $M -np 2 $T \
  --gtest_filter='Ep.CombineOneRole*:Ep.PairAndTokenLayoutsAgree:Ep/EpMatrix.*:EpRestrictedSms*:Ep.ZipfSkew:Ep.ZeroTokenRanks'
call_end
