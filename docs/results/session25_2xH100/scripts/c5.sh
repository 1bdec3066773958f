# Session 25, call 5 (run(kind nvidia-h100-x2), right after c4 on the warm machine, its build-device kept): issue 23's
# SM sweep of the same tree.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 300
M="mpirun --allow-run-as-root --bind-to none"; B=build-device/bench/ferry-bench
[ -x $B ] || call_build_dir build-device "ferry-bench"
call_run ep_sms 240 $M -np 2 $B ep --mode ht --sms 4,8,16,24,48,132 --route-ahead \
  --csv $CALL_DIR/ep_sms_2xH100_2ranks.csv
grep -h -E "^ht " $CALL_DIR/ep_sms.log | head -60
call_end
