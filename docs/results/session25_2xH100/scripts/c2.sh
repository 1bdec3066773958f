# Session 25, call 2 (run(kind nvidia-h100-x2, carry [".deps", ".ab"])): NOTE [EP combine rows in flight] in the
# two-role and low-latency combines (combine-rows-in-flight_b2b39f9.patch; the one-role and cross-node kernels'
# PTX is main's) against main afdb229: its tests (the restricted-SM test alone first), 4 ranks sharing the GPUs,
# the three sanitizers on the combines it changes, --check, then A/B with NCCL in the same runs.
# c1's sweep left main's one-role kernel (1024 threads, no rows in flight, no items ahead) the fastest.
# Before (here): scripts/ab_trees.sh base=main rif=main+docs/results/session24_2xH100/combine-rows-in-flight_b2b39f9.patch
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 570
call_build_trees ferry-bench base rif+ferry_gpu_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/rif/build/bench/ferry-bench; T=.ab/rif/build/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
SMALL='Ep.CombineOneRoleAndTwoRolesAgree:Ep/EpMatrix.DispatchCombine/ll_bf16_h2048_k3:Ep.LowLatencyBackToBack'
call_run restricted 60 $M -np 2 $T --gtest_filter='EpRestrictedSms*'
call_run ep_np2 100 $M -np 2 $T --gtest_filter='Ep*'
call_run np4_shared 60 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter='Ep.CombineOneRole*:Ep/EpMatrix.*'
for tool in memcheck racecheck synccheck; do
  call_run $tool 60 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter="$SMALL"
done
call_ab two_role_ 3 $B $N "-x FERRY_EP_COMBINE_ONE_ROLE=0" ep --mode ht --layout expanded --dispatch-types bf16 \
  --sms 24
call_ab ll_ 3 $B $N "" ep --mode ll --tokens 128,512
call_ab ht_ 2 $B $N "" ep --mode ht --sms 24
call_run check_new 60 $M -np 2 $N ep --mode ll --tokens 128 --check --csv ''
grep -a -E "check" $CALL_DIR/check_new.log | head -4
call_end
