# Session 20, call 3: branch exp/net-no-reuse-wait (no reuse wait at the start of a direct-path send; low-latency
# dispatch headers written when the send starts; NOTE [EP across nodes: reuse]) against main d5cc75e.
# Before: rm -rf .ab; for t in base:main new:exp/net-no-reuse-wait; do d=.ab/${t%%:*}; mkdir -p $d;
#         git archive ${t#*:} | tar -x -C $d; done
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session20_2xH100/scripts/c3.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 540
call_build_trees ferry-bench base new+ferry_gpu_tests,ferry_gpu_fault_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/new/build/tests/ferry_gpu_tests; F=.ab/new/build/tests/ferry_gpu_fault_tests
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
SM="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
IPC="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
call_run ep_2x1_sm 60 $M -np 2 $SM $T --gtest_filter='Ep*'
call_run ep_2x2_direct 90 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 -x UCX_TLS=sm,self \
  -x FERRY_EP_HIERARCHICAL=0 $T --gtest_filter='Ep*'
call_run ep_2x1_tcp 60 $M -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=tcp,self $T --gtest_filter='Ep*'
call_run ep_2x1_ipc 60 $M -np 2 $IPC $T --gtest_filter='Ep*'
call_run faults 60 env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY $F --gtest_filter='KilledPeer.AcrossNodes'
call_run san_memcheck 60 $M -np 2 $SM $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter='Ep/EpMatrix.DispatchCombine/*bf16*:Ep.HandleReuse'
call_run san_racecheck 60 $M -np 2 $SM $SAN --tool racecheck --error-exitcode 86 $T --gtest_filter='Ep/EpMatrix.DispatchCombine/*bf16*:Ep.HandleReuse'
call_ab ll_ 4 $B $N "$SM -x NCCL_P2P_DISABLE=1" ep --layout expanded --mode ll --tokens 1,128,512
call_ab ht_ 2 $B $N "$SM -x NCCL_P2P_DISABLE=1" ep --layout expanded --mode ht
call_ab tcpll_ 2 $B $N "-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1" ep --layout expanded --mode ll --tokens 128
call_end
