# Prepared in session 44, NOT run. run(kind nvidia-h200-x2 or nvidia-h100-x2, carry [".deps"]), ~300 s, from a
# checkout of main. Why do several tcp streams (FERRY_UCX_TCP_STREAMS, NOTE [Several tcp streams]) make the EP over
# tcp 1.15-1.95x slower while the proxy's exchange of the same shape gets 2.3x faster (session 44 c3)?
#   1. a Release build and an EP-trace build (FERRY_EP_TRACE=1: each cross-node kernel's points);
#   2. EP expanded over tcp with --halves and --stages, 1 and 4 streams (one virtual node per GPU);
#   3. the trace build's ht / ll rows with 1 and 4 streams, rank 0's trace lines;
#   4. ferry-bench net --exchange with the proxy's stats (fences and their time), 1 and 4 streams.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_streams 560
{ nvidia-smi -q | grep -iE "product name|bus id"; nproc; } > $CALL_DIR/host.txt 2>&1
call_build_dir build-device ferry-bench
FERRY_EP_TRACE=1 call_build_dir build-trace ferry-bench
M="mpirun --allow-run-as-root --bind-to none -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
TCP="-x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
for k in 1 4; do
  call_run ep_s$k 120 $M $TCP -x FERRY_UCX_TCP_STREAMS=$k build-device/bench/ferry-bench ep --layout expanded \
    --halves --stages --no-nccl --iters 10 --warmup 3 --csv $CALL_DIR/ep_s$k.csv
  call_run trace_s$k 90 $M $TCP -x FERRY_UCX_TCP_STREAMS=$k build-trace/bench/ferry-bench ep --layout expanded \
    --tokens 128 --mode ll --no-nccl --iters 3 --warmup 1 --csv ""
  call_run net_s$k 40 $M $TCP -x FERRY_UCX_TCP_STREAMS=$k build-device/bench/ferry-bench net --memory host \
    --exchange --sizes 16M,64M --bytes 512M --no-perftest
done
grep -a "halves\|stages" $CALL_DIR/ep_s*.log | head -20; grep -a "rank 0" $CALL_DIR/trace_s*.log | tail -40
grep -ah "^exchange\|fence" $CALL_DIR/net_s*.log
call_end
