# Prepared in session 26 for the next session (NOT run). run(kind nvidia-h100-x2, carry [".deps"]), ~200 s, on main.
# Where the one-role combine's L2 prefetch stops paying (NOTE [EP combine L2 prefetch]): measured 0.89 at 24 SMs,
# 0.996 at 48, slower at 132; main prefetches up to 32 blocks (FERRY_EP_COMBINE_PREFETCH_MAX_BLOCKS). Here every
# grid with the prefetch (1000) against none (0), 24-48 SMs, 3 rounds alternating, NCCL in the same runs.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_prefetch_threshold 400
call_build_dir build-device "ferry-bench"
B=$ROOT/build-device/bench/ferry-bench
for v in 0 1000; do
  printf '#!/usr/bin/env bash\nexport FERRY_EP_COMBINE_PREFETCH_MAX_BLOCKS=%s\nexec %s "$@"\n' $v "$B" > $CALL_DIR/pf$v
  chmod +x $CALL_DIR/pf$v
done
call_ab threshold_ 3 $CALL_DIR/pf0 $CALL_DIR/pf1000 "" ep --mode ht --layout expanded --dispatch-types bf16 \
  --sms 24,28,32,36,40,44,48
rm -f $CALL_DIR/pf0 $CALL_DIR/pf1000
call_end
