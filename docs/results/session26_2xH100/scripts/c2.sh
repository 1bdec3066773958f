# Session 26, call 2 (run(kind nvidia-h100-x2, carry [".deps", ".ab"])): the one-role combine asking the L2 for each
# row one step ahead (NOTE [EP combine L2 prefetch], branch exp/l2-prefetch-1: c1's variant 1,0 as its own code, no
# env) against main. Its tests (the restricted-SM test alone first; 3 and 4 ranks sharing the GPUs), the three
# sanitizers on the one-role test (bitwise one role = two roles), --check, then A/B with NCCL in the same runs.
# Before (here): scripts/ab_trees.sh base=main pf=exp/l2-prefetch-1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 570
call_build_trees ferry-bench base pf+ferry_gpu_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/pf/build/bench/ferry-bench; T=.ab/pf/build/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_run restricted 60 $M -np 2 $T --gtest_filter='EpRestrictedSms*'
call_run ep_np2 100 $M -np 2 $T --gtest_filter='Ep*'
call_run np4_shared 60 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter='Ep.CombineOneRole*:Ep/EpMatrix.*ht*'
call_run np3_shared 40 $M -np 3 -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter='Ep.CombineOneRole*:Ep.ZipfSkew'
call_run memcheck_np3 90 $M -np 3 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_TIMEOUT_MS=60000 $SAN --tool memcheck \
  --error-exitcode 86 $T --gtest_filter='Ep.CombineOneRole*'
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
