# Session 42 c2 (prepared in session 41 as next_epoch_tag32.sh). run(kind nvidia-h200-x2, carry [".deps", ".ab"]), ~560 s, from
# a checkout of main with trees made by
#   scripts/ab_trees.sh base=main tag=exp/epoch-tag32        (rebase the branch on main first)
# exp/epoch-tag32: device::epoch_tag32 (NOTE [Epoch tags]) in place of the epoch's low 32 bits in the LL AllReduce's
# lines and the EP tagged counts and routing boxes. The low 32 bits are 0 at every multiple of 2^32 calls, where a
# word no call wrote before (zeroed) read as the call's: a silent wrong result once in 2^32 calls, for a call that
# reads past every earlier call's extent. The fix costs a few integer operations per thread and launch. The
# branch also packs the cross-node relay words (pipelined ranges) as epoch << 8 | ranges: with epoch << 32 a range
# wait passed on the previous call's word after 2^32 calls.
#   1. build both; 2. tag: *AllReduce* and Ep* on 2 ranks; the low-latency and staged EP tests on 3 and 8 ranks
#   sharing the GPUs; memcheck / racecheck / synccheck of the staged tests and of the LL AllReduce matrix row;
#   3. A/B base against tag: AllReduce bf16 4K-64K (the LL range) and EP low latency T=1/128/256/512, 3 rounds.
# Merge if the tests and sanitizers pass and no case reads > 1.01.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 580
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
M="mpirun --allow-run-as-root --bind-to none"; SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_build_trees ferry-bench base tag+ferry_gpu_tests
T=.ab/tag/build/tests/ferry_gpu_tests; B=$ROOT/.ab/base/build/bench/ferry-bench; N=$ROOT/.ab/tag/build/bench/ferry-bench
call_run tag_ar 60 $M -np 2 $T --gtest_filter="*AllReduce*"
call_ep_checks $T
call_run tag_2x1 100 $M -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 $T --gtest_filter='Ep*'
call_run tag_2x2_direct 100 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 -x FERRY_EP_HIERARCHICAL=0 \
  $T --gtest_filter='Ep*'
call_run tag_ar_memcheck 50 $M -np 2 $SAN --tool memcheck --error-exitcode 86 $T \
  --gtest_filter="All/AllReduceMatrix.*one_shot_bf16:AllReduce.GraphReplayWithNewData"
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/*.log | head -12
call_ab ar_ 3 $B $N "" allreduce --dtypes bf16 --sizes 4K,16K,64K --algos auto --check
call_ab ll_ 3 $B $N "" ep --mode ll --tokens 1,128,256,512 --check
call_end
