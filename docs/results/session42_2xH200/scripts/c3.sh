# Session 42 c3. run(kind nvidia-h200-x2, carry [".deps", ".ab"]), ~300 s, from a checkout of main with trees made by
#   scripts/ab_trees.sh base=main tag=exp/epoch-tag32        (e4611d7)
# c2 found epoch_tag32 in the LL AllReduce 1.6-2.2% slower (4-64 KB); e4611d7 keeps the plain low 32 bits there and
# makes the device counter skip epochs whose low 32 bits are 0 (device::epoch_after). The EP half is c2's (unchanged).
#   1. build both; 2. tag: *AllReduce* on 2 ranks (with the new AllReduce.LlTagsAcrossTheEpochWrap), the new test on
#   3 and 8 ranks sharing the GPUs, memcheck of it; racecheck of the staged EP tests (c2's stage ran out of its 40 s);
#   3. A/B base against tag: AllReduce bf16 4K-64K (LL), 1M, 16M (other kernels' finish_epoch), 3 rounds, NCCL in the run.
# Merge if the tests and sanitizers pass and no case reads > 1.01.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 560
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
M="mpirun --allow-run-as-root --bind-to none"; SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_build_trees ferry-bench base tag+ferry_gpu_tests
T=.ab/tag/build/tests/ferry_gpu_tests; B=$ROOT/.ab/base/build/bench/ferry-bench; N=$ROOT/.ab/tag/build/bench/ferry-bench
call_run tag_ar 60 $M -np 2 $T --gtest_filter="*AllReduce*"
for n in 3 8; do
  call_run tag_wrap_np$n 60 $M -np $n -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter="AllReduce.LlTags*"
done
call_run tag_wrap_memcheck 40 $M -np 2 $SAN --tool memcheck --error-exitcode 86 $T \
  --gtest_filter="AllReduce.LlTagsAcrossTheEpochWrap"
call_run ep_racecheck 100 $M -np 2 $SAN --tool racecheck --error-exitcode 86 $T \
  --gtest_filter='Ep.StagedLowLatencyOnFewSms:Ep.LowLatencyGraphReplayWithNewRouting'
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/*.log | head -12
call_ab ar_ 3 $B $N "" allreduce --dtypes bf16 --sizes 4K,16K,64K,1M,16M --algos auto --check
call_end
