# Session 38, call 5 (the device time's last ~250 s). run(kind nvidia-h100-x2, carry [".deps"]).
# The EP trace (FERRY_EP_TRACE=1 build of main 776aa59's working tree) of the low-latency combine at T=128 and 256,
# for the next session (issue 23's combine <= 22 us at T=128; T=256 at 0.92x NCCL). No A/B, no figures.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 170
M="mpirun --allow-run-as-root --bind-to none"
FERRY_EP_TRACE=1 call_build_dir build-trace ferry-bench
BT=build-trace/bench/ferry-bench
for tok in 128 256; do
  call_run trace_$tok 25 $M -np 2 $BT ep --mode ll --tokens $tok --no-nccl
  grep -a "ferry ep trace" $CALL_DIR/trace_$tok.log | grep -a "epoch 50 " | grep -a "combine" | head -20
done
call_end
