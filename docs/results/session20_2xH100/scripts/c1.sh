# Session 20, call 1 (session 19's next_ep_signals.sh; only these comment lines edited since it ran): branch
# exp/ep-mapped-signals (26d7c73 = 392f3c6 rebased on main 0b6667f; EP's direct-path signals stored by the GPU over
# mapped peers, NOTE [EP across nodes: signals stored by the GPU]) against main: what it needed before a merge. Session
# 19's call 7 ran its Ep* suite over sm (57 passed) and a short A/B over sm (LL 2 rounds: combine 0.962, dispatch
# bf16 0.958, fp8 1.027; HT 1 round: 0.887-0.961). Here: 2x2 direct (NVLink and mapped peers in one window), tcp,
# killed peers, memcheck, and an A/B with enough rounds to tell LL fp8's 1.027 from noise.
# Before: rm -rf .ab; for t in base:main new:exp/ep-mapped-signals; do d=.ab/${t%%:*}; mkdir -p $d;
#         git archive ${t#*:} | tar -x -C $d; done
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session20_2xH100/scripts/c1.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 560
call_build_trees ferry-bench base new+ferry_gpu_tests,ferry_gpu_fault_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/new/build/tests/ferry_gpu_tests; F=.ab/new/build/tests/ferry_gpu_fault_tests
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
SM="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
call_run ep_2x1_sm 60 $M -np 2 $SM $T --gtest_filter='Ep*'
call_run ep_2x2_direct 90 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 -x UCX_TLS=sm,self \
  -x FERRY_EP_HIERARCHICAL=0 $T --gtest_filter='Ep*'
call_run ep_2x1_tcp 90 $M -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=tcp,self $T --gtest_filter='Ep*'
call_run faults 90 env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY $F --gtest_filter='KilledPeer.AcrossNodes'
call_run san_memcheck 90 $M -np 2 $SM $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter='Ep/EpMatrix.DispatchCombine/*bf16*:Ep.HandleReuse'
call_ab ll_ 4 $B $N "$SM -x NCCL_P2P_DISABLE=1" ep --layout expanded --mode ll --tokens 1,128,512
call_ab ht_ 3 $B $N "$SM -x NCCL_P2P_DISABLE=1" ep --layout expanded --mode ht
call_end
