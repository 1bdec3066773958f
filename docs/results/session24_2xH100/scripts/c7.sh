# Session 24, call 7 (run(kind nvidia-h100-x2, carry [".deps", ".ab"])): NOTE [EP combine rows in flight]
# (branch exp/combine-rows-in-flight) against main b1862f6 (the one-role combine).
# Before (here): scripts/ab_trees.sh base=b1862f6 new=exp/combine-rows-in-flight
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c7 330
call_build_trees ferry-bench base new+ferry_gpu_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench; T=.ab/new/build/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"
call_ab ht_ 3 $B $N "" ep --mode ht --layout expanded --dispatch-types bf16 --sms 8,24,48
call_ab two_role_ 2 $B $N "-x FERRY_EP_COMBINE_ONE_ROLE=0" ep --mode ht --layout expanded --dispatch-types bf16 --sms 24
call_run ep_np2 60 $M -np 2 $T --gtest_filter='Ep*'
call_ab ll_ 2 $B $N "" ep --mode ll --tokens 128,512
call_run check_new 40 $M -np 2 $N ep --mode ht --layout expanded --dispatch-types bf16 --sms 24 --check --csv ''
grep -a -E "^ht |check" $CALL_DIR/check_new.log | head -6
call_end
