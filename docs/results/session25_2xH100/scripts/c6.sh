# Session 25, call 6 (run(kind nvidia-h100-x2, carry [".deps"])): main 55b2591's tree (as c4) at more ranks: Ep* as
# 2 virtual nodes x 2 ranks on the 2 GPUs (the hierarchical path, whose combine send kernel's PTX moved by one
# load's order), the one-role test and the high-throughput matrix at 8 ranks sharing the 2 GPUs (a rank is a token's
# third to eighth contributor: its partial staged as before).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 400
call_build_dir build-device "ferry_gpu_tests"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests
call_run ep_2x2_sm 150 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 -x UCX_TLS=sm,self $T \
  --gtest_filter='Ep*'
call_run np8_shared 150 $M -np 8 -x FERRY_TEST_SHARE_GPUS=1 $T \
  --gtest_filter='Ep.CombineOneRole*:Ep/EpMatrix.*ht_bf16*:Ep.ZipfSkew:Ep.ZeroTokenRanks'
call_end
