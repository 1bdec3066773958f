# For a session with 2 GPUs, after next48_2gpu.sh: run(kind ..., carry [".deps"]), ~250 s. The working tree built with
# the EP trace (FERRY_EP_TRACE=1, NOTE [EP trace]); the low-latency dispatch over UCX shared memory, one virtual node
# per GPU: the kernels' phase points and, new in session 48, the receive's per-warp phase sums (internode_place.cuh:
# 0 headers and offsets, 1 an item's meta loads, 2 the rest of the item; "net_dispatch_recv items" lines, printed at
# launch epochs 50 mod 100: us per warp of the grid and marks; per mark = us * warps / marks). With the overlap patch
# applied to the tree (git apply docs/results/session48_1xH200/scripts/ll_overlap_sm.patch) where it has landed.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin trace48 240
FERRY_EP_TRACE=1 call_build_dir build-trace ferry-bench
N=$ROOT/build-trace/bench/ferry-bench
call_virtual_nodes
EP="$N ep --layout expanded --no-nccl --aligned --csv ''"
for t in fp8 bf16; do
  call_run tr_ll_$t 30 $M2 $SM $EP --mode ll --dispatch-types $t --iters 60 --warmup 3
  grep -a "net_dispatch_recv items\|^ll" $CALL_DIR/tr_ll_$t.log | head -12
done
call_end
