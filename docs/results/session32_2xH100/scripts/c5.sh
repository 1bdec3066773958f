# Session 32, call 5 (run(kind nvidia-h100-x2, carry [".deps"]), ~400 s) on main with c2-c4 merged (NOTE [EP layout
# add loads], NOTE [EP fp8 wide stores], NOTE [EP record once]): issue 23's figures from one run, NCCL in the same
# processes: high throughput with halves, --check and route ahead; low latency 3 runs; the SM sweep 4..132 if time.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 330
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader | sort | uniq -c
call_build_dir build-device ferry-bench
M="mpirun --allow-run-as-root --bind-to none"; B=build-device/bench/ferry-bench
call_run ep_table 120 $M -np 2 $B ep --mode ht --halves --check --route-ahead --csv $CALL_DIR/ep_ht_2xH100_2ranks.csv
grep -h -E "^(ht|ll) |check:" $CALL_DIR/ep_table.log | head -20
for r in 1 2 3; do
  call_run ep_ll_$r 40 $M -np 2 $B ep --mode ll --tokens 1,128,512 --route-ahead --csv $CALL_DIR/ep_ll_2xH100_2ranks_$r.csv
  grep -h -E "^ll " $CALL_DIR/ep_ll_$r.log | head -12
done
[ "$(call_left)" -gt 100 ] || { echo "no time for the SM sweep"; call_end; exit 0; }
call_run ep_sms 120 $M -np 2 $B ep --mode ht --sms 4,8,16,24,48,132 --route-ahead --layout rank_rows \
  --csv $CALL_DIR/ep_sms_2xH100_2ranks.csv
grep -h -E "^ht " $CALL_DIR/ep_sms.log | head -60
call_end
