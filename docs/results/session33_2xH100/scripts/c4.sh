# Session 33 c4. run(kind nvidia-h100-x2, carry [".deps"]). One build of main (1e4d729); knobs by wrapper scripts.
# (1) Why rank-rows fp8 quantized in the kernel (--ht-quantize, "fp8q") takes 222-225 us at 24 and 48 SMs (c3),
# about bf16's time for half its bytes and no faster with twice the SMs. Hypothesis: NOTE [EP rank rows by role]
# gives the own rows a fixed 8 blocks (rank_rows_local_blocks: ceil(8 / (W - 1)) whatever the SM count), sized for
# a copy (43 GB/s an SM); quantizing, those 8 blocks read all 58.7 MB of bf16 tokens and quantize them, the critical
# path. Sweep FERRY_EP_RANK_ROWS_LOCAL_BLOCKS (0 = every block mixed: a token read and quantized once) against the
# default at 24 and 48 SMs, alternating, NCCL beside. Pre-quantized fp8 and bf16 rows ride along (their own rows
# leave by the copy engine or the same split).
# (2) NOTE [EP staged low latency]: the combine after a staged *fp8* dispatch (the combine row of
# --dispatch-types fp8 comes from the fp8 buffer), direct vs staged, 3 rounds.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 560
call_build_dir build-device "ferry-bench"
M="mpirun --allow-run-as-root --bind-to none"; B=build-device/bench/ferry-bench
w() { printf '#!/usr/bin/env bash\nexport %s\nexec %s "$@"\n' "$2" "$ROOT/$B" > $CALL_DIR/$1; chmod +x $CALL_DIR/$1; }
w lbD "FERRY_C4_DEFAULT=1"; w lb0 "FERRY_EP_RANK_ROWS_LOCAL_BLOCKS=0"; w lb12 "FERRY_EP_RANK_ROWS_LOCAL_BLOCKS=12"
w lb24 "FERRY_EP_RANK_ROWS_LOCAL_BLOCKS=24"; w direct "FERRY_EP_LL_STAGED=0"; w staged "FERRY_EP_LL_STAGED=1"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,clocks_throttle_reasons.active --format=csv > $CALL_DIR/clocks.txt
RR="ep --mode ht --layout rank_rows --ht-quantize"
call_ab lb0_24_ 2 $CALL_DIR/lbD $CALL_DIR/lb0 "" $RR --sms 24,48
call_ab lb12_24_ 2 $CALL_DIR/lbD $CALL_DIR/lb12 "" $RR --sms 24
call_ab lb24_48_ 2 $CALL_DIR/lbD $CALL_DIR/lb24 "" $RR --sms 48
call_run check_lb0 60 $M -np 2 $CALL_DIR/lb0 $RR --sms 8,24 --check --csv ''
call_ab llfp8_ 3 $CALL_DIR/direct $CALL_DIR/staged "" ep --mode ll --tokens 1,128,512 --dispatch-types fp8
call_run check_staged_fp8 60 $M -np 2 $CALL_DIR/staged ep --mode ll --tokens 1,128,512 --dispatch-types fp8 --check --csv ''
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,clocks_throttle_reasons.active --format=csv >> $CALL_DIR/clocks.txt
rm -f $CALL_DIR/lb* $CALL_DIR/direct $CALL_DIR/staged
call_end
