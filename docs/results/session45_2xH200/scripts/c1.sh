# Session 45 c1. run(kind nvidia-h200-x2, carry [".deps"]), ~580 s, main 91d2786 (session 44's final code).
#   1. session 44's last commits (review mends of the send lanes, CPU-tested only) on GPUs: KilledPeer over tcp,
#      *AllReduce* / Ep* as 2x1 over tcp with 1 stream (the default) and 2 streams;
#   2. why several tcp streams slow the EP (session44 next_streams_ep_trace.sh): EP expanded over tcp with --halves
#      --stages at 1 / 4 streams, the EP trace build's ll rows, ferry-bench net --exchange with the proxy's stats.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 575
{ nvidia-smi -q | grep -iE "product name|bus id"; nproc; } > $CALL_DIR/host.txt 2>&1
call_build_dir build-device "ferry-bench ferry_gpu_tests ferry_gpu_fault_tests"
FERRY_EP_TRACE=1 call_build_dir build-trace ferry-bench
T=build-device/tests/ferry_gpu_tests; F=build-device/tests/ferry_gpu_fault_tests
M="mpirun --allow-run-as-root --bind-to none -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
TCP="-x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
call_run killed_tcp 90 env UCX_TLS=tcp,self $F --gtest_filter="KilledPeer.AcrossNodes"
call_run tcp_2x1 100 $M $TCP $T --gtest_filter="*AllReduce*:Ep*"
for k in 1 4; do
  call_run ep_s$k 100 $M $TCP -x FERRY_UCX_TCP_STREAMS=$k build-device/bench/ferry-bench ep --layout expanded \
    --halves --stages --no-nccl --iters 10 --warmup 3 --csv $CALL_DIR/ep_s$k.csv
  call_run trace_s$k 60 $M $TCP -x FERRY_UCX_TCP_STREAMS=$k build-trace/bench/ferry-bench ep --layout expanded \
    --tokens 128 --mode ll --no-nccl --iters 3 --warmup 1 --csv ""
  call_run net_s$k 40 $M $TCP -x FERRY_UCX_TCP_STREAMS=$k build-device/bench/ferry-bench net --memory host \
    --exchange --sizes 16M,64M --bytes 512M --no-perftest
done
call_run tcp_2x1_s2 100 $M $TCP -x FERRY_UCX_TCP_STREAMS=2 $T --gtest_filter="*AllReduce*:Ep*"
grep -a "FAILED  \]\|Failure\|Which is\|timed out" $CALL_DIR/tcp_2x1*.log | head -12
call_end
