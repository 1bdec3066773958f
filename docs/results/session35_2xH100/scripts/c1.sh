# Session 35, call 1. run(kind nvidia-h100-x2, carry [".deps"]), ~300 s.
# Main 5b65460: where the low-latency dispatch's time goes at T=256 / 512 (NOTE [EP trace]): routed against
# plain (the layout's share: 9 us at T=512 in session 33) and the trace build's points, for the layout design.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 330
{ nvidia-smi -q | grep -iE "bus id|serial number"; } > $CALL_DIR/host.txt 2>&1
( FERRY_EP_TRACE=1 call_build_dir build-trace ferry-bench > $CALL_DIR/build_trace.txt 2>&1 ) &
call_build_dir build-device ferry-bench
wait; cat $CALL_DIR/build_trace.txt
M="mpirun --allow-run-as-root --bind-to none"; B=build-device/bench/ferry-bench; BT=build-trace/bench/ferry-bench
for r in 1 2; do
  call_run ep_ll_$r 60 $M -np 2 $B ep --mode ll --tokens 1,128,256,512 --route-ahead --check \
    --csv $CALL_DIR/ep_ll_2xH100_2ranks_$r.csv
  grep -h -E "^ll " $CALL_DIR/ep_ll_$r.log | head -30
done
for tok in 512 256 128; do
  call_run trace_ll_$tok 40 $M -np 2 $BT ep --mode ll --tokens $tok --no-nccl
  grep -a "ferry ep trace" $CALL_DIR/trace_ll_$tok.log | grep -a "rank 0 dispatch" | grep -av " span " | head -22
done
call_end
