# Session 49 c3 on one H200: run(kind nvidia-h200, carry [".deps"]), ~200 s. The working tree of exp/ll-ready-words
# built with the EP trace (FERRY_EP_TRACE=1): the low-latency dispatch over UCX shared memory with ready words, 2
# virtual nodes on the ONE GPU under MPS: the send and receive grids' phase points and the receive's per-warp phase
# sums (phase 1 now includes the wait for each item's ready word). Why c2's ready words read ~1.0x the overlap alone.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 ${C3_BUDGET:-220}
FERRY_EP_TRACE=1 call_build_dir build-trace ferry-bench
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
M="mpirun --allow-run-as-root --bind-to none -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
call_virtual_nodes
EP="$ROOT/build-trace/bench/ferry-bench ep --layout expanded --no-nccl --aligned --csv ''"
for t in fp8 bf16; do
  call_run tr_ll_$t 40 $M2 $SM $EP --mode ll --dispatch-types $t --iters 60 --warmup 3
  grep -a "epoch 50" $CALL_DIR/tr_ll_$t.log | grep -a "dispatch" | head -16
done
echo quit | nvidia-cuda-mps-control
call_end
