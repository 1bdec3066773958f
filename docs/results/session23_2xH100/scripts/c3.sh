# Session 23, call 3 (nvidia-h100-x2, right after call 2 on the same held machine; run(carry [".deps"]): .ab stays
# built there). The cross-node GPU suites owed by session 22's transport change (requests that name their peer,
# per-endpoint flushes), on .ab/new's test binary: main 83a0770 + the combine patch, whose change is inside a node
# only (the cross-node kernels and the transport are main's).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 400
(cd .ab/new && cmake --build build -j32 --target ferry_gpu_fault_tests > /dev/null 2>&1) || echo "fault tests: build failed"
T=.ab/new/build/tests/ferry_gpu_tests; F=.ab/new/build/tests/ferry_gpu_fault_tests
M="mpirun --allow-run-as-root --bind-to none"
V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
call_run ep_2x1_sm 60 $M -np 2 $V -x UCX_TLS=sm,self $T --gtest_filter='Ep*'
call_run faults 40 env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY $F --gtest_filter='KilledPeer.AcrossNodes'
call_run ep_2x1_tcp 50 $M -np 2 $V -x UCX_TLS=tcp,self $T --gtest_filter='Ep*'
call_run ep_2x1_ipc 40 $M -np 2 $V -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0 \
  $T --gtest_filter='Ep*'
call_run ep_2x2 80 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 -x UCX_TLS=sm,self $T --gtest_filter='Ep*'
call_run ar_2x1_sm 60 $M -np 2 $V -x UCX_TLS=sm,self $T --gtest_filter='AllReduce*:*Hier*'
call_end
