# Prepared in session 24 for the next session (NOT run: the device time ran out).
# run(kind nvidia-h100-x2, carry [".deps", ".ab"]): rows in flight for the two-role and
# low-latency combine only (the one-role and cross-node kernels PTX-identical to main's, the two-role kernel
# PTX-identical to c7's new tree): the sanitizers on it, and the A/B again.
# Before (here): scripts/ab_trees.sh base=main \
#   new=main+docs/results/session24_2xH100/combine-rows-in-flight_d73ef97.patch
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_c8 175
call_build_trees ferry-bench base new+ferry_gpu_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench; T=.ab/new/build/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  call_run san_$tool 40 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter='Ep.CombineOneRole*'
done
call_ab ll_ 1 $B $N "" ep --mode ll --tokens 128,512
call_ab two_role_ 1 $B $N "-x FERRY_EP_COMBINE_ONE_ROLE=0" ep --mode ht --layout expanded --dispatch-types bf16 --sms 24
call_end
