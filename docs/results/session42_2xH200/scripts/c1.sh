# Session 42 c1 (prepared in session 41 as next_ar_warp_flags.sh). run(kind nvidia-h200-x2, carry [".deps", ".ab"]).
# ".ab"]), ~420 s, from a checkout of main with the tree made by
#   scripts/ab_trees.sh wf=exp/ar-warp-flags        (rebase the branch on main first)
# exp/ar-warp-flags: the pipelined one-shot (two ranks, calls above the LL128 range: 6-32 MiB) with warp pairs, each
# push warp releasing its own flag every k chunks of 2 KB (FERRY_ONE_SHOT_PIPELINED_WARP_CHUNKS=k; 0 = main's block
# steps, SASS unchanged; NOTE [Pipelined one-shot, warp flags]). Aim: issue 23's AllReduce 16 MB >= 1.05x torch
# symm-mem two-shot (main: 61.3 us against 61.6 on 2xH200, session 40 c7; the floor is 47.8).
#   1. build; 2. the new test and *AllReduce* on 2 ranks, memcheck / racecheck / synccheck of the new test;
#   3. on the one binary, knob unset against k = 1 / 2 / 4, bf16 6-32 MiB, 3 rounds, NCCL in the run.
# Merge (with the best k as the default above the LL128 range) only if that k is <= 1.0 everywhere and the tests
# and sanitizers pass; then the torch bench for issue 23's row.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 540
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
M="mpirun --allow-run-as-root --bind-to none"; SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_build_trees "ferry-bench ferry_gpu_tests" wf
T=.ab/wf/build/tests/ferry_gpu_tests; N=$ROOT/.ab/wf/build/bench/ferry-bench
call_run wf_test 60 $M -np 2 $T --gtest_filter="AllReduce.PipelinedWarpFlags*"
call_run wf_ar 60 $M -np 2 $T --gtest_filter="*AllReduce*"
for tool in memcheck racecheck synccheck; do
  call_run wf_$tool 60 $M -np 2 -x FERRY_TIMEOUT_MS=120000 $SAN --tool $tool --error-exitcode 86 $T \
    --gtest_filter="AllReduce.PipelinedWarpFlagsEveryTypeAndOp"
done
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/wf_*.log | head -12
if ! grep -aq "FAILED  \]" $CALL_DIR/wf_test.log $CALL_DIR/wf_ar.log; then
  for k in 1 2 4; do
    printf '#!/bin/bash\nexport FERRY_ONE_SHOT_PIPELINED_WARP_CHUNKS=%s\nexec %s "$@"\n' $k "$N" > /tmp/wf$k.sh
    chmod +x /tmp/wf$k.sh
    call_ab wf${k}_ 3 $N /tmp/wf$k.sh "" allreduce --dtypes bf16 --sizes 6M,8M,16M,32M --algos auto --check
  done
fi
call_end
