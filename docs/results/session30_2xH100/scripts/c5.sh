# Session 30, call 5 (run(kind nvidia-h100-x2, carry [".deps"])): branch exp/ll-staged with the built-in rule of
# ep::stages_low_latency_rows (staged while max tokens x hidden x dtype bytes <= 4 MiB; c4 forced it on everywhere).
# Ep* on 2 GPUs on the default, then A/B in one binary: FERRY_EP_LL_STAGED=0 (base) against the default, 2 rounds.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 215
call_build_dir build-device "ferry-bench ferry_gpu_tests"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests; B=build-device/bench/ferry-bench
call_run ep_np2 60 $M -np 2 $T --gtest_filter='Ep*'
w() { printf '#!/usr/bin/env bash\nexport %s\nexec %s "$@"\n' "$2" "$ROOT/$B" > $CALL_DIR/$1; chmod +x $CALL_DIR/$1; }
w base "FERRY_EP_LL_STAGED=0"; w new "FERRY_AB_SIDE=new"
call_ab ll_ 2 $CALL_DIR/base $CALL_DIR/new "" ep --mode ll --tokens 1,128,512
rm -f $CALL_DIR/base $CALL_DIR/new
call_end
