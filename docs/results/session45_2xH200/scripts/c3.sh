# Session 45 c3. run(kind nvidia-h200-x2, carry [".deps"]), ~250 s, main 91d2786 built with the EP trace
# (FERRY_EP_TRACE=1, NOTE [EP trace]). c1/c2: the fused EP over tcp takes ~17-21 ms per high-throughput dispatch
# or combine with 1 or 4 streams, while its halves one after the other take ~10 ms with 4 streams (the network
# part then ~9 ms). Where do the fused call's milliseconds go? Rank 0's trace at epoch 50 (the spans of the
# 15 launches before it, each kernel's phase points), high throughput bf16 only, 1 and 4 streams, graph and
# no graph; then low latency with 4 streams.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 300
FERRY_EP_TRACE=1 call_build_dir build-trace ferry-bench
M="mpirun --allow-run-as-root --bind-to none -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
TCP="-x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
EP="build-trace/bench/ferry-bench ep --layout expanded --no-nccl --csv ''"
HT="--mode ht --dispatch-types bf16 --iters 60 --warmup 3"
call_run ht_s1 40 $M $TCP -x FERRY_UCX_TCP_STREAMS=1 $EP $HT
call_run ht_s4 40 $M $TCP -x FERRY_UCX_TCP_STREAMS=4 $EP $HT
call_run ht_s4_nograph 40 $M $TCP -x FERRY_UCX_TCP_STREAMS=4 $EP $HT --no-graph
call_run ht_s1_nograph 40 $M $TCP -x FERRY_UCX_TCP_STREAMS=1 $EP $HT --no-graph
call_run ll_s4 30 $M $TCP -x FERRY_UCX_TCP_STREAMS=4 $EP --mode ll --dispatch-types bf16 --iters 60 --warmup 3
call_run ll_s1 30 $M $TCP -x FERRY_UCX_TCP_STREAMS=1 $EP --mode ll --dispatch-types bf16 --iters 60 --warmup 3
for f in $CALL_DIR/*.log; do echo "== $(basename $f)"; grep -a "^ht\|^ll" $f; grep -ac "ferry ep trace" $f; done
call_end
