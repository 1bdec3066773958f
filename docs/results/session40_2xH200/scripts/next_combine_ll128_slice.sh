# Prepared in session 40, NOT run (device time spent). run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~330 s,
# from a checkout of main with trees made by: scripts/ab_trees.sh base=main slice=exp/combine-ll128-slice
# (rebase the branch on main first). exp/combine-ll128-slice e9a8735: the LL combine's peer partials as LL128 lines
# (FERRY_EP_COMBINE_LL128, off by default), with the rows reduced in the plain layout into a shared-memory slice, so
# the load rounds match the ready-word path (session 40 c5: the first version was 1.08-1.18x slower, ep-notes).
#   1. build both trees; 2. slice: its test and the low-latency Ep suites with the knob on 2 and 3 shared ranks,
#   memcheck / synccheck of the test (racecheck needs > 50 s there); Ep* without the knob (unchanged path);
#   3. A/B on the slice binary, knob off against on, LL T=1/128/256/512, 3 rounds; 4. AllReduce tests (the lane
#   map moved to include/ferry/device/ll128_lines.hpp) and an A/B base vs slice at 1-6 MiB.
# Merge only with every A/B case <= 1.01 and the tests and sanitizers clean; then make the knob the default on 2
# ranks and run the A/B against main again.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_slice 500
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
M="mpirun --allow-run-as-root --bind-to none"; SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_build_trees ferry-bench base slice+ferry_gpu_tests
TS=.ab/slice/build/tests/ferry_gpu_tests; BS=$ROOT/.ab/slice/build/bench/ferry-bench
B=$ROOT/.ab/base/build/bench/ferry-bench
LLT='Ep.LowLatencyCombineLl128*:Ep/EpMatrix.*ll*:Ep.LowLatency*:Ep.Staged*:Ep.TokensWithoutExperts:Ep.SkewAll*:Ep.HandleReuse*'
call_run slice_ep 80 $M -np 2 -x FERRY_EP_COMBINE_LL128=1 $TS --gtest_filter="$LLT"
call_run slice_np3 60 $M -np 3 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_EP_COMBINE_LL128=1 $TS \
  --gtest_filter='Ep.LowLatencyCombineLl128*:Ep/EpMatrix.*ll*'
call_run slice_ep_off 100 $M -np 2 $TS --gtest_filter='Ep*'
call_run slice_ar 60 $M -np 2 $TS --gtest_filter='*AllReduce*'
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/slice_*.log | head -12
for tool in memcheck synccheck; do
  call_run slice_$tool 50 $M -np 2 $SAN --tool $tool --error-exitcode 86 $TS \
    --gtest_filter="Ep.LowLatencyCombineLl128MatchesReadyWords"
done
if ! grep -aq "FAILED  \]" $CALL_DIR/slice_*.log; then
  printf '#!/bin/bash\nexport FERRY_EP_COMBINE_LL128=1\nexec %s "$@"\n' "$BS" > /tmp/slice.sh && chmod +x /tmp/slice.sh
  call_ab slice_ 3 $BS /tmp/slice.sh "" ep --mode ll --tokens 1,128,256,512 --check
  call_ab ar_ 2 $B $BS "" allreduce --dtypes bf16 --sizes 1M,4M,6M --algos auto --no-nccl --check
fi
call_end
