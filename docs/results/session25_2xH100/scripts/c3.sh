# Session 25, call 3 (run(kind nvidia-h100-x2, carry [".deps", ".ab"])): the one-role combine with the own partial
# first (NOTE [EP combine one role: own partial first], branch exp/own-first 663caf5) against main 4f0a2a4 (rows in
# flight merged). Its tests (the restricted-SM test alone first; 3 and 4 ranks sharing the GPUs, where a rank can
# be a token's third contributor and stages its partial as before), the three sanitizers on the one-role test
# (bitwise one role = two roles), --check, then A/B with NCCL in the same runs.
# Before (here): scripts/ab_trees.sh base=main own=exp/own-first
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 570
call_build_trees ferry-bench base own+ferry_gpu_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/own/build/bench/ferry-bench; T=.ab/own/build/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_run restricted 60 $M -np 2 $T --gtest_filter='EpRestrictedSms*'
call_run ep_np2 100 $M -np 2 $T --gtest_filter='Ep*'
call_run np4_shared 60 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter='Ep.CombineOneRole*:Ep/EpMatrix.*ht*'
call_run np3_shared 40 $M -np 3 -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter='Ep.CombineOneRole*:Ep.ZipfSkew'
for tool in memcheck racecheck synccheck; do
  call_run $tool 60 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter='Ep.CombineOneRole*'
done
call_run check_new 40 $M -np 2 $N ep --mode ht --layout expanded --dispatch-types bf16 --sms 24 --check --csv ''
grep -a -E "check" $CALL_DIR/check_new.log | head -3
call_ab ht_ 3 $B $N "" ep --mode ht --layout expanded --dispatch-types bf16 --sms 8,24,48
call_ab all_ 1 $B $N "" ep --mode ht --sms 24
call_ab two_role_ 1 $B $N "-x FERRY_EP_COMBINE_ONE_ROLE=0" ep --mode ht --layout expanded --dispatch-types bf16 \
  --sms 24
call_ab ll_ 1 $B $N "" ep --mode ll --tokens 128,512
call_end
