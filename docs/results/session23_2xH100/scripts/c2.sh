# Session 23, call 2 (nvidia-h100-x2; run(carry [".deps", ".ab"])). Call 1 ran base against base: session 22's "Before"
# step (`git apply` inside .ab/new, a folder git ignores inside the checkout) applied nothing and said nothing. Here
# .ab/new = main 83a0770 + combine-async_2b31e01.patch applied with `patch -p1` (src/ep/combine_async.cuh present).
# The same stages, shorter: the A/B without --check (call 1's 4-SM-count --check runs took ~84 s each); the combine
# checked by one --check run of the new tree.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 470
test -f .ab/new/src/ep/combine_async.cuh || { echo "the new tree lacks the patch"; call_end; exit 1; }
call_build_trees ferry-bench base new+ferry_gpu_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench; T=.ab/new/build/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_run ep_np2 60 $M -np 2 $T --gtest_filter='Ep*'
call_run ep_np2_async_off 30 $M -np 2 -x FERRY_EP_COMBINE_ASYNC=0 $T --gtest_filter='Ep/EpMatrix.*:Ep.CombineAsync*'
call_run ep_np4_shared 40 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter='Ep.CombineAsync*:Ep/EpMatrix.*ht*'
for tool in memcheck racecheck synccheck; do
  call_run san_$tool 40 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter='Ep.CombineAsync*'
done
call_run check_new 60 $M -np 2 $N ep --mode ht --layout expanded --dispatch-types bf16 --sms 24 --check --csv ''
grep -a -E "^ht |check|mismatch" $CALL_DIR/check_new.log | head -8
call_ab ht_ 3 $B $N "" ep --mode ht --layout expanded --dispatch-types bf16 --sms 8,24,48
call_ab ll_ 2 $B $N "" ep --mode ll --tokens 128,512
call_end
