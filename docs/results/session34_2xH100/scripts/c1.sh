# Session 34, call 1 (was session 33's next_split_sweeps.sh). run(kind nvidia-h100-x2, carry [".deps"]), ~450 s.
# One build of main; knobs by wrapper scripts (one binary), NCCL beside, 2 rounds alternating per pair.
# (a) NOTE [EP rank rows by role]: the 8 own-row blocks were chosen on bf16 (24 SMs: 209.7 us at 8, 211.0 at 7,
#     214.4 at 10). Pre-quantized fp8 moves half the bytes per row; rank rows fp8 reads 126.1 us against the issue's
#     <= 125 (session 33 c6). Sweep FERRY_EP_RANK_ROWS_LOCAL_BLOCKS 4 / 6 / 10 against the default at 24 and 48 SMs.
#     If fp8 wants another count than bf16, the rule in src/ep/send_roles.cpp takes the row bytes.
# (b) The expanded fp8q dispatch (bf16 quantized in the send half) reads 312 us against 281 for fp8 input at 24 SMs:
#     the send half (8 of 24 SMs, halves_split.cpp: receive 2/3) reads all the bf16 tokens and quantizes them, as
#     the rank rows' own-row blocks did before session 33's rule. Sweep FERRY_EP_DISPATCH_RECV_BLOCKS 12 / 14 against
#     the default 16, with --ht-quantize (rows bf16, fp8q) and without (bf16, fp8).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 570
call_build_dir build-device "ferry-bench"
B=build-device/bench/ferry-bench
w() { printf '#!/usr/bin/env bash\nexport %s\nexec %s "$@"\n' "$2" "$ROOT/$B" > $CALL_DIR/$1; chmod +x $CALL_DIR/$1; }
w def "FERRY_SWEEP_DEFAULT=1"
for n in 4 6 10; do w lb$n "FERRY_EP_RANK_ROWS_LOCAL_BLOCKS=$n"; done
for n in 12 14; do w rb$n "FERRY_EP_DISPATCH_RECV_BLOCKS=$n"; done
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,clocks_throttle_reasons.active --format=csv > $CALL_DIR/clocks.txt
for n in 6 4 10; do
  call_ab lb${n}_ 2 $CALL_DIR/def $CALL_DIR/lb$n "" ep --mode ht --layout rank_rows --sms 24,48
done
for n in 12 14; do
  call_ab rb${n}q_ 2 $CALL_DIR/def $CALL_DIR/rb$n "" ep --mode ht --layout expanded --sms 24 --ht-quantize
  call_ab rb${n}_ 2 $CALL_DIR/def $CALL_DIR/rb$n "" ep --mode ht --layout expanded --sms 24 --dispatch-types fp8
done
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,clocks_throttle_reasons.active --format=csv >> $CALL_DIR/clocks.txt
rm -f $CALL_DIR/def $CALL_DIR/lb* $CALL_DIR/rb*
call_end
