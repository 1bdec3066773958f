# Prepared in session 22 (no device time), for the next session on nvidia-h100-x2, after next_c1.sh (~480 s):
# the expanded combine with its send loads by cp.async (patch combine-async_2b31e01.patch beside this folder,
# NOTE [EP combine async loads] in it) against main: its tests and sanitizers, then the A/B.
# Before (here): rm -rf .ab; for t in base new; do mkdir -p .ab/$t; git archive main | tar -x -C .ab/$t; done
#                (cd .ab/new && git apply ../../docs/results/session22_cpu/combine-async_2b31e01.patch)
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session22_cpu/scripts/next_c2.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 560
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
call_build_trees ferry-bench base new+ferry_gpu_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench; T=.ab/new/build/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_run ep_np2 90 $M -np 2 $T --gtest_filter='Ep*'
call_run ep_np2_async_off 60 $M -np 2 -x FERRY_EP_COMBINE_ASYNC=0 $T --gtest_filter='Ep/EpMatrix.*:Ep.CombineAsync*'
call_run ep_np4_shared 60 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter='Ep.CombineAsync*:Ep/EpMatrix.*ht*'
call_run ep_2x1_sm 60 $M -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self $T \
  --gtest_filter='Ep/EpMatrix.*:Ep.CombineAsync*'
for tool in memcheck racecheck synccheck; do
  call_run san_$tool 60 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter='Ep.CombineAsync*'
done
call_ab ht_ 3 $B $N "" ep --mode ht --layout expanded --sms 8,16,24,48 --check
call_ab ll_ 2 $B $N "" ep --mode ll --tokens 128,512
call_end
