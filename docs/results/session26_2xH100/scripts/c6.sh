# Session 26, call 6 (run(kind nvidia-h100-x2, carry [".deps"]), ~240 s): the working tree = main with the L2
# prefetch only on one-role grids of at most 32 blocks (both kernels' PTX equal to measured ones). The restricted-SM
# test alone, the Ep* suite on 2 GPUs, then the expanded combine at 8 / 24 / 48 / 132 SMs with NCCL in the same
# run (2 runs), against c5 (prefetch everywhere: 361.2 us at 132 SMs) and session 25 (no prefetch: 303.4).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 290
call_build_dir build-device "ferry-bench ferry_gpu_tests"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests; B=build-device/bench/ferry-bench
call_run restricted_np2 60 $M -np 2 $T --gtest_filter='EpRestrictedSms*'
call_run ep_np2 100 $M -np 2 $T --gtest_filter='Ep*'
for r in 1 2; do
  [ "$(call_left)" -gt 25 ] || break
  call_run combine_sms_$r 40 $M -np 2 $B ep --mode ht --layout expanded --dispatch-types bf16 --sms 8,24,48,132 \
    --csv $CALL_DIR/combine_sms_2xH100_2ranks_$r.csv
  grep -h -E "^ht " $CALL_DIR/combine_sms_$r.log | grep combine
done
call_end
