# Prepared in session 39, NOT run (device time spent). run(kind nvidia-h100-x2, carry [".deps"]), ~170 s, from a
# checkout of exp/trace-ll-combine-phases (main + phase sums in the low-latency combine, trace builds only; its
# non-trace combine.cu SASS is main's, cuobjdump). Where a T=128 combine's time goes (issue 23's <= 22 us):
#   combine_ll_send: phase 0 between items, 1 a peer partial gathered, reduced and its stores issued, 2 the
#     system-scope release (MEMBAR.SYS waits for those NVLink stores);
#   combine_ll_recv: phase 0 the own rows' slots, 1 the own partial reduced, 2 the wait for the peers', 3 the sum.
# Read: if phase 2 of the send is a large share of phase 1 + 2, flagged packets (no fence) are worth building
# (ep-notes "Session 39", Next); if the receive's phase 2 dominates, the send side is the chain, as session 38 c5 said.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin trace_phases 170
M="mpirun --allow-run-as-root --bind-to none"
FERRY_EP_TRACE=1 call_build_dir build-trace ferry-bench
BT=build-trace/bench/ferry-bench
for tok in 1 128 256; do
  call_run trace_$tok 25 $M -np 2 $BT ep --mode ll --tokens $tok --no-nccl
  grep -a "ferry ep trace" $CALL_DIR/trace_$tok.log | grep -a "epoch 50 " | grep -a "combine" | head -24
done
call_end
