# Session 37 c6 (the device time's last 250 s): base = main a6ada33 (code ba5f7bf), new = exp/strong-box-stores (the routing boxes'
# id entries as relaxed system-scope 16-byte stores instead of weak ones). The low-latency GPU tests on new, then
# an A/B of 2 rounds at T=1 / 128 / 512 as far as the time goes.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 175
call_base_new ferry_gpu_tests  # sets M, T, B, N, SAN
call_run ep_ll 40 $M -np 2 $T --gtest_filter='Ep/EpMatrix.*ll*:Ep.ZeroTokenRanks:Ep.BadExpert*:Ep.Staged*:Ep.HandleReuse:Ep.LowLatency*'
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/ep_ll.log | head -12
call_ab ll_ 2 $B $N "" ep --mode ll --tokens 1,128,512
call_end
