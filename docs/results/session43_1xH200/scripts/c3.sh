# Session 43 c3. run(kind nvidia-h200, carry [".deps", ".ab"]), ~540 s, from a checkout of main, trees made by
#   scripts/ab_trees.sh new=exp/tcp-receive-worker
# One H200: 2 virtual nodes sharing the GPU under MPS, over loopback tcp (the transport is host work).
# exp/tcp-receive-worker: where every remote endpoint is tcp alone, a second UCX worker with its own thread receives
# the peers' puts (NOTE [A receive worker for tcp]); FERRY_UCX_RECEIVE_THREAD=0 is main's one worker, so one binary
# A/Bs it by knob (base = knob 0, new = unset).
#   1. build; 2. the cross-node GPU suites over tcp as 2x1 and 2x2 (4 ranks), KilledPeer.AcrossNodes over tcp;
#   3. ferry-bench net: both ways at once 4 / 16 MiB and the exchange 1 / 16 / 64 MiB, knob 0 then unset;
#   4. A/B AllReduce bf16 256K-64M (3 rounds) and EP ht / ll (2 rounds) over tcp, no NCCL (one GPU).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 560
{ nvidia-smi -q | grep -iE "product name|bus id"; nproc; } > $CALL_DIR/host.txt 2>&1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
export CALL_MPIRUN="mpirun --allow-run-as-root --bind-to none -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x FERRY_TEST_SHARE_GPUS=1"
M=$CALL_MPIRUN
call_build_trees "ferry-bench ferry_gpu_tests ferry_gpu_fault_tests" new
T=.ab/new/build/tests/ferry_gpu_tests; N=$ROOT/.ab/new/build/bench/ferry-bench
V="-x UCX_TLS=tcp,self -x FERRY_RANKS_PER_NODE=1"
call_run tcp_2x1 150 $M -np 2 $V $T --gtest_filter="*AllReduce*:Ep*"
call_run tcp_2x2 150 $M -np 4 -x UCX_TLS=tcp,self -x FERRY_RANKS_PER_NODE=2 $T --gtest_filter="*AllReduce*:Ep*"
call_run tcp_killed 60 $M -np 2 $V .ab/new/build/tests/ferry_gpu_fault_tests --gtest_filter="KilledPeer.AcrossNodes"
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out\|receive thread" $CALL_DIR/tcp_*.log | head -12
for k in 0 1; do
  call_run net_both_k$k 60 $M -np 2 $V -x FERRY_UCX_RECEIVE_THREAD=$k $N net --memory host --sizes 4M,16M \
    --bytes 256M --both-ways
  call_run net_exchange_k$k 60 $M -np 2 $V -x FERRY_UCX_RECEIVE_THREAD=$k $N net --memory host --exchange \
    --sizes 1M,16M,64M --bytes 512M --no-perftest
done
grep -ah "^host\|^exchange" $CALL_DIR/net_*.log
printf '#!/bin/bash\nexport FERRY_UCX_RECEIVE_THREAD=0\nexec %s "$@"\n' "$N" > /tmp/one_worker.sh; chmod +x /tmp/one_worker.sh
call_ab ar_ 3 /tmp/one_worker.sh $N "$V" allreduce --sizes 256K,1M,4M,16M,64M --dtypes bf16 --algos auto --no-nccl
call_ab ep_ 2 /tmp/one_worker.sh $N "$V" ep --layout expanded --no-nccl --iters 20 --warmup 5
echo quit | nvidia-cuda-mps-control
call_end
