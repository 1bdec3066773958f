# Session 49 c1 on one H200: run(kind nvidia-h200, carry [".deps"]), ~380 s. Only one H200 was lent, so
# correctness scale and directions only. (1) The low-latency dispatch over UCX shared memory, 2 virtual nodes on the
# one GPU under MPS, built with the EP trace (FERRY_EP_TRACE=1): the kernels' phase points and the receive's
# per-warp phase sums (session 48's next48_trace.sh, never run): where the receive's time goes, by shape. (2)
# ferry-bench pcie-peer (never run) on 2 ranks sharing the GPU: that it runs and checks; its rates here are
# two processes of ONE GPU. (3) The zero-copy combine tests on main (ec7d87b's mend, not GPU-run) on 2 shared ranks.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 ${C1_BUDGET:-390}
call_build_dir build "ferry-bench ferry_gpu_tests"
FERRY_EP_TRACE=1 call_build_dir build-trace ferry-bench
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
M="mpirun --allow-run-as-root --bind-to none -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
call_virtual_nodes
EP="$ROOT/build-trace/bench/ferry-bench ep --layout expanded --no-nccl --aligned --csv ''"
for t in fp8 bf16; do
  call_run tr_ll_$t 40 $M2 $SM $EP --mode ll --dispatch-types $t --iters 60 --warmup 3
  grep -a "net_dispatch_recv items\|net_dispatch_send\|net_dispatch_recv \|^ll" $CALL_DIR/tr_ll_$t.log | head -16
done
call_run pcie_peer 60 $M2 -x FERRY_TEST_SHARE_GPUS=1 build/bench/ferry-bench pcie-peer --sms 8,32,66 --bytes 16M \
  --item-bytes 1792
call_run pcie_peer_rows 60 $M2 -x FERRY_TEST_SHARE_GPUS=1 build/bench/ferry-bench pcie-peer --sms 8,66 --bytes 16M
grep -hE "^(own|peer)_then_load|check|rror" $CALL_DIR/pcie_peer*.log | head -20
call_run zc_2shared 120 $M2 -x FERRY_TEST_SHARE_GPUS=1 build/tests/ferry_gpu_tests \
  --gtest_filter="EpZeroCopy*:EpRankRowsCases*:EpOwnRowsFirst*:EpBuffer*Refus*"
grep -a "FAILED  \]\|Failure\|timed out" $CALL_DIR/zc_2shared.log | head -8
echo quit | nvidia-cuda-mps-control
call_end
