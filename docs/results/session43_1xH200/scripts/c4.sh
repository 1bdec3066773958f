# Session 43 c4. run(kind nvidia-h200, carry [".deps", ".ab"]), ~420 s, from a checkout of main, trees made by
#   scripts/ab_trees.sh base=main new=exp/tcp-receive-worker
# 1. KilledPeer.AcrossNodes over tcp without MPS (c3 ran it under MPS, where the victim's SIGKILL faulted every
#    client on the GPU: cudaErrorIllegalAddress in the survivors, also before the kill; the test is written for
#    time-sliced contexts), with the receive worker (unset) and without (0).
# 2. Over UCX shared memory nothing should change (no receive worker there; the context now has
#    mt_workers_shared): A/B main against the branch, 2 virtual nodes sharing the GPU under MPS, AllReduce bf16
#    256K-64M (3 rounds) and EP expanded ht / ll (2 rounds), no NCCL (one GPU); Ep* / AllReduce as 2x1 over sm.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 560
{ nvidia-smi -q | grep -iE "product name|bus id"; nproc; } > $CALL_DIR/host.txt 2>&1
call_build_trees ferry-bench base new+ferry_gpu_tests,ferry_gpu_fault_tests
T=.ab/new/build/tests/ferry_gpu_tests; B=$ROOT/.ab/base/build/bench/ferry-bench; N=$ROOT/.ab/new/build/bench/ferry-bench
F=.ab/new/build/tests/ferry_gpu_fault_tests
for k in 1 0; do
  call_run killed_tcp_k$k 120 env UCX_TLS=tcp,self FERRY_UCX_RECEIVE_THREAD=$k $F --gtest_filter="KilledPeer.AcrossNodes"
done
grep -a "FAILED  \]\|verdict\|Which is" $CALL_DIR/killed_*.log | head -20
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
export CALL_MPIRUN="mpirun --allow-run-as-root --bind-to none -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x FERRY_TEST_SHARE_GPUS=1"
V="-x UCX_TLS=sm,self -x FERRY_RANKS_PER_NODE=1"
call_run sm_2x1 150 $CALL_MPIRUN -np 2 $V $T --gtest_filter="*AllReduce*:Ep*"
call_ab sm_ar_ 3 $B $N "$V" allreduce --sizes 256K,1M,4M,16M,64M --dtypes bf16 --algos auto --no-nccl
call_ab sm_ep_ 2 $B $N "$V" ep --layout expanded --no-nccl --iters 40 --warmup 5
echo quit | nvidia-cuda-mps-control
call_end
