# Prepared in session 43, NOT run. run(kind nvidia-h200-x2 or nvidia-h100-x2, carry [".deps"]), ~250 s, from a
# checkout of main. Issue 24's worst rows are the low-latency dispatch over UCX shared memory (2xH100 session 30:
# bf16 / fp8 0.77 / 0.60x NCCL, 125.8 / 100.9 us at T=128, where the host-memory floor of the halves one after the
# other is ~71 / 37 us: session 34). Where do the other ~50-60 us go? The EP trace (NOTE [EP trace], FERRY_EP_TRACE=1
# builds) prints each cross-node kernel's points (send: start, reuse wait, records packed; receive: start, every
# source seen, records placed), and --halves times the halves apart, with NCCL beside.
#   1. a Release build and a trace build; 2. the ll rows over sm with --halves, NCCL in the run (2 virtual nodes, one
#   per GPU); 3. the trace build's ll rows at T=1 / 128 (no NCCL), rank 0's trace lines.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_ll_sm 580
{ nvidia-smi -q | grep -iE "product name|bus id"; nproc; } > $CALL_DIR/host.txt 2>&1
call_build_dir build-device ferry-bench
FERRY_EP_TRACE=1 call_build_dir build-trace ferry-bench
M="mpirun --allow-run-as-root --bind-to none -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
SM="-x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1"
call_run ll_sm 120 $M $SM build-device/bench/ferry-bench ep --mode ll --tokens 128 --halves --csv $CALL_DIR/ll_sm.csv
call_run ll_sm_trace 120 $M $SM build-trace/bench/ferry-bench ep --mode ll --tokens 1,128 --no-nccl --csv ""
grep -a "^ll" $CALL_DIR/ll_sm.log; grep -a "rank 0" $CALL_DIR/ll_sm_trace.log | tail -30
call_end
