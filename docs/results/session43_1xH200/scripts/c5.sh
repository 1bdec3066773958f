# Session 43 c5. run(kind nvidia-h200, carry [".deps", ".ab"]), ~450 s, from a checkout of main, trees made by
#   scripts/ab_trees.sh base=main new=exp/tcp-receive-worker
# The receive-worker branch after c4: its context is shared by two threads' workers only where the receive worker
# runs (tcp alone), so over shared memory the transport is main's again.
#   1. build; 2. KilledPeer.AcrossNodes over tcp (no MPS: time-sliced contexts, as the test is written);
#   3. under MPS, 2 virtual nodes sharing the GPU: *AllReduce* / Ep* as 2x1 and 2x2 over tcp, 2x1 over sm;
#   4. A/B main against the branch: EP expanded ht / ll over sm (3 rounds), AllReduce bf16 256K-64M and EP over
#      tcp (2 rounds each), no NCCL (one GPU).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 560
{ nvidia-smi -q | grep -iE "product name|bus id"; nproc; } > $CALL_DIR/host.txt 2>&1
call_build_trees ferry-bench base new+ferry_gpu_tests,ferry_gpu_fault_tests
T=.ab/new/build/tests/ferry_gpu_tests; B=$ROOT/.ab/base/build/bench/ferry-bench; N=$ROOT/.ab/new/build/bench/ferry-bench
call_run killed_tcp 120 env UCX_TLS=tcp,self .ab/new/build/tests/ferry_gpu_fault_tests --gtest_filter="KilledPeer.AcrossNodes"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
export CALL_MPIRUN="mpirun --allow-run-as-root --bind-to none -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x FERRY_TEST_SHARE_GPUS=1"
M=$CALL_MPIRUN
S="-x UCX_TLS=sm,self -x FERRY_RANKS_PER_NODE=1"; V="-x UCX_TLS=tcp,self -x FERRY_RANKS_PER_NODE=1"
call_run tcp_2x1 150 $M -np 2 $V $T --gtest_filter="*AllReduce*:Ep*"
call_run tcp_2x2 150 $M -np 4 -x UCX_TLS=tcp,self -x FERRY_RANKS_PER_NODE=2 $T --gtest_filter="*AllReduce*:Ep*"
call_run sm_2x1 150 $M -np 2 $S $T --gtest_filter="*AllReduce*:Ep*"
grep -a "FAILED  \]\|Failure\|Which is\|timed out" $CALL_DIR/*.log | head -12
call_ab sm_ep_ 3 $B $N "$S" ep --layout expanded --no-nccl --iters 40 --warmup 5
call_ab tcp_ar_ 2 $B $N "$V" allreduce --sizes 256K,1M,4M,16M,64M --dtypes bf16 --algos auto --no-nccl
call_ab tcp_ep_ 2 $B $N "$V" ep --layout expanded --no-nccl --iters 20 --warmup 5
echo quit | nvidia-cuda-mps-control
call_end
