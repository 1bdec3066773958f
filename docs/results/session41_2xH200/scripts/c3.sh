# Session 41 c3. run(kind nvidia-h200-x4, carry [".deps", ".ab"]), from a checkout of main, trees made by
#   scripts/ab_trees.sh base=main oah2=main+docs/results/session41_2xH200/patches/oah_two_ranks.patch pre=6c22302
# c2 found the low-latency combine at 4 ranks slower than docs/results/ep_4xH200.txt (38.9 us against 35.2, its
# receive half 26.0 against 16.0). Suspect: the own partial at home (c181484 / d137ca8, session 37, timed on 2
# ranks only). oah2 keeps it on 2 ranks only; pre is the commit before it.
#   1. build the three trees;
#   2. base (main, with the LL128 timeout-report fix): *AllReduce* on 2 ranks, memcheck / synccheck of the LL128
#      test; oah2: Ep* on 4 ranks;
#   3. A/B on 4 ranks: base against oah2, LL T=1/128/256/512, 3 rounds, --check; base against pre, 2 rounds.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 540
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
M="mpirun --allow-run-as-root --bind-to none"; SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_build_trees ferry-bench base+ferry_gpu_tests oah2+ferry_gpu_tests pre
TB=.ab/base/build/tests/ferry_gpu_tests; TO=.ab/oah2/build/tests/ferry_gpu_tests
B=$ROOT/.ab/base/build/bench/ferry-bench; O=$ROOT/.ab/oah2/build/bench/ferry-bench; P=$ROOT/.ab/pre/build/bench/ferry-bench
call_run base_ar 60 $M -np 2 $TB --gtest_filter="*AllReduce*"
for tool in memcheck synccheck; do
  call_run base_ar_$tool 50 $M -np 2 $SAN --tool $tool --error-exitcode 86 $TB \
    --gtest_filter="AllReduce.Ll128OneShotEveryTypeAndOp"
done
call_run oah2_ep_np4 120 $M -np 4 $TO --gtest_filter="Ep*"
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/*.log | head -12
export CALL_NP=4
call_ab oah2_ 3 $B $O "" ep --mode ll --tokens 1,128,256,512 --check
call_ab pre_ 2 $B $P "" ep --mode ll --tokens 1,128,256,512 --check
call_end
