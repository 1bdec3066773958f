# Session 30, call 3 (run(kind nvidia-h100-x2, carry [".deps"])) on main with the tagged counts merged (NOTE [EP tagged
# counts]; c2 ran its tests on the same source): (1) issue 23's figures from one run, NCCL in the same processes:
# high throughput with halves, --check and route ahead; low latency 3 runs; the SM sweep 4..132 (last, if time);
# (2) the low-latency timeline (NOTE [EP trace]) at T=1 and 128 on the tagged counts, for the exchange-free design;
# (3) the low-latency split and chunk knobs at T=128 on the new counts (one binary, knobs by wrapper, 2 rounds).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 560
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
( FERRY_EP_TRACE=1 call_build_dir build-trace ferry-bench > $CALL_DIR/build_trace.txt 2>&1 ) &
call_build_dir build-device ferry-bench
wait; cat $CALL_DIR/build_trace.txt
M="mpirun --allow-run-as-root --bind-to none"; B=build-device/bench/ferry-bench; BT=build-trace/bench/ferry-bench
call_run ep_table 120 $M -np 2 $B ep --mode ht --halves --check --route-ahead --csv $CALL_DIR/ep_ht_2xH100_2ranks.csv
grep -h -E "^(ht|ll) |check:" $CALL_DIR/ep_table.log | head -20
for r in 1 2 3; do
  call_run ep_ll_$r 40 $M -np 2 $B ep --mode ll --tokens 1,128,512 --route-ahead --csv $CALL_DIR/ep_ll_2xH100_2ranks_$r.csv
  grep -h -E "^ll " $CALL_DIR/ep_ll_$r.log | head -12
done
for tok in 1 128; do
  call_run trace_ll_$tok 40 $M -np 2 $BT ep --mode ll --tokens $tok --no-nccl
  grep -a "ferry ep trace" $CALL_DIR/trace_ll_$tok.log | grep -a "rank 0" | grep -av " span " | head -40
done
w() { printf '#!/usr/bin/env bash\nexport %s\nexec %s "$@"\n' "$2" "$ROOT/$B" > $CALL_DIR/$1; chmod +x $CALL_DIR/$1; }
w base "FERRY_AB_SIDE=base"; w d44 "FERRY_EP_DISPATCH_RECV_BLOCKS=44"; w c33 "FERRY_EP_COMBINE_RECV_BLOCKS=33"
w k2048 "FERRY_EP_CHUNK_COLS=2048"
for v in d44 c33 k2048; do
  [ "$(call_left)" -gt 150 ] || break
  call_ab ll_${v}_ 2 $CALL_DIR/base $CALL_DIR/$v "" ep --mode ll --tokens 128
done
rm -f $CALL_DIR/base $CALL_DIR/d44 $CALL_DIR/c33 $CALL_DIR/k2048
[ "$(call_left)" -gt 90 ] || { echo "no time for the SM sweep"; call_end; exit 0; }
call_run ep_sms 200 $M -np 2 $B ep --mode ht --sms 4,8,16,24,48,132 --route-ahead \
  --csv $CALL_DIR/ep_sms_2xH100_2ranks.csv
grep -h -E "^ht " $CALL_DIR/ep_sms.log | head -60
call_end
