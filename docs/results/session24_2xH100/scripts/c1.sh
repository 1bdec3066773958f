# Session 24, call 1: run as prepared, with the trees made by scripts/ab_trees.sh base=95c3f8a (main)
#   new=95c3f8a+docs/results/session23_2xH100/combine-one-role_ee4b67a.patch
# (main had moved past 660373c only in host code, docs and the trace stamps).
# Prepared in session 23 (compiled for sm_90, CPU tests passed, NOT run on a GPU) for the next session, after
# next_c1.sh: the one-role expanded combine (combine-one-role_ee4b67a.patch beside this folder; NOTE [EP combine
# one role] in src/ep/combine.cu; ep-notes, session 23) against its base. Its tests, the sanitizers, the
# restricted-SM test (the ticket order is what keeps partly resident grids from waiting on each other), then the
# A/B of high throughput. next_c3.sh, right after on the same machine, A/Bs what the refactor touched besides.
# Before (here): scripts/ab_trees.sh base=660373c new=660373c+docs/results/session23_2xH100/combine-one-role_ee4b67a.patch
# run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~500 s: bash docs/results/session23_2xH100/scripts/next_c2.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_c2 480
grep -q kOneRole .ab/new/src/ep/combine.cu || { echo "the new tree lacks the patch"; call_end; exit 1; }
call_build_trees ferry-bench base new+ferry_gpu_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench; T=.ab/new/build/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_run ep_np2 70 $M -np 2 $T --gtest_filter='Ep*'
call_run restricted_np2 60 $M -np 2 $T --gtest_filter='EpRestrictedSms*'
call_run two_role_np2 40 $M -np 2 -x FERRY_EP_COMBINE_ONE_ROLE=0 $T --gtest_filter='Ep/EpMatrix.*ht*:Ep.CombineOneRole*'
call_run ep_np4_shared 50 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter='Ep.CombineOneRole*:Ep/EpMatrix.*ht*'
for tool in memcheck racecheck synccheck; do
  call_run san_$tool 50 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter='Ep.CombineOneRole*'
done
call_run check_new 40 $M -np 2 $N ep --mode ht --layout expanded --dispatch-types bf16 --sms 24 --check --csv ''
grep -a -E "^ht |check" $CALL_DIR/check_new.log | head -6
call_ab ht_ 3 $B $N "" ep --mode ht --layout expanded --dispatch-types bf16 --sms 8,24,48
call_end
