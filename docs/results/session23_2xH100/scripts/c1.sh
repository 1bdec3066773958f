# Session 23, call 1 (nvidia-h100-x2; run(carry [".deps", ".ab"])): session 22's prepared expanded combine with its send
# loads by cp.async (docs/results/session22_cpu/combine-async_2b31e01.patch, NOTE [EP combine async loads]) against
# main 83a0770: its tests, the sanitizers and the A/B; then the cross-node GPU suites owed by session 22's transport
# change (requests that name their peer, per-endpoint flushes), which runs in both trees.
# Before: rm -rf .ab; for t in base new; do mkdir -p .ab/$t; git archive main | tar -x -C .ab/$t; done
#         (cd .ab/new && git apply ../../docs/results/session22_cpu/combine-async_2b31e01.patch)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 555
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
call_build_trees ferry-bench base new+ferry_gpu_tests,ferry_gpu_fault_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench
T=.ab/new/build/tests/ferry_gpu_tests; F=.ab/new/build/tests/ferry_gpu_fault_tests
M="mpirun --allow-run-as-root --bind-to none"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
SM="$V -x UCX_TLS=sm,self"; TCP="$V -x UCX_TLS=tcp,self"
IPC="$V -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
call_run ep_np2 90 $M -np 2 $T --gtest_filter='Ep*'
call_run ep_np2_async_off 40 $M -np 2 -x FERRY_EP_COMBINE_ASYNC=0 $T --gtest_filter='Ep/EpMatrix.*:Ep.CombineAsync*'
call_run ep_np4_shared 50 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter='Ep.CombineAsync*:Ep/EpMatrix.*ht*'
for tool in memcheck racecheck synccheck; do
  call_run san_$tool 50 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter='Ep.CombineAsync*'
done
call_ab ht_ 3 $B $N "" ep --mode ht --layout expanded --sms 8,16,24,48 --check
call_ab ll_ 2 $B $N "" ep --mode ll --tokens 128,512
call_run ep_2x1_sm 60 $M -np 2 $SM $T --gtest_filter='Ep*'
call_run faults 40 env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY $F --gtest_filter='KilledPeer.AcrossNodes'
call_run ep_2x1_tcp 50 $M -np 2 $TCP $T --gtest_filter='Ep*'
call_run ep_2x1_ipc 40 $M -np 2 $IPC $T --gtest_filter='Ep*'
call_run ep_2x2 80 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 -x UCX_TLS=sm,self $T --gtest_filter='Ep*'
call_end
