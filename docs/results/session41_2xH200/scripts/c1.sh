# Session 41 c1. run(kind nvidia-h200-x2, carry [".deps", ".ab"]), from a checkout of main, with trees made by
#   scripts/ab_trees.sh base=main next=exp/next41
# exp/next41 = main + exp/ll128-warp-wait d9e565a (device::spin_wait_warp for the LL128 AllReduce poll) +
# exp/combine-ll128-slice e9a8735 (the LL combine's peer partials as LL128 lines reduced through a shared-memory
# ring, behind FERRY_EP_COMBINE_LL128, off by default); both prepared in session 40, not GPU-run before.
#   1. build both trees;
#   2. next: *AllReduce* on 2 ranks; memcheck / synccheck of the LL128 AllReduce test;
#   3. next with the knob: the LL128 combine test and the low-latency Ep suites, 2 ranks and 3 shared ranks;
#   4. A/B on next's binary, knob off against on, LL T=1/128/256/512, 3 rounds, --check;
#   5. A/B base against next, AllReduce bf16 1-6 MiB, NCCL in the same run, 2 rounds.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 560
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
M="mpirun --allow-run-as-root --bind-to none"; SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_build_trees ferry-bench base next+ferry_gpu_tests
T=.ab/next/build/tests/ferry_gpu_tests; N=$ROOT/.ab/next/build/bench/ferry-bench; B=$ROOT/.ab/base/build/bench/ferry-bench
call_run next_ar 60 $M -np 2 $T --gtest_filter="*AllReduce*"
for tool in memcheck synccheck; do
  call_run next_ar_$tool 50 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T \
    --gtest_filter="AllReduce.Ll128OneShotEveryTypeAndOp"
done
LLT='Ep.LowLatencyCombineLl128*:Ep/EpMatrix.*ll*:Ep.LowLatency*:Ep.Staged*:Ep.TokensWithoutExperts:Ep.SkewAll*:Ep.HandleReuse*'
call_run slice_ep 80 $M -np 2 -x FERRY_EP_COMBINE_LL128=1 $T --gtest_filter="$LLT"
call_run slice_np3 60 $M -np 3 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_EP_COMBINE_LL128=1 $T \
  --gtest_filter='Ep.LowLatencyCombineLl128*:Ep/EpMatrix.*ll*'
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/next_*.log $CALL_DIR/slice_*.log | head -12
if ! grep -aq "FAILED  \]" $CALL_DIR/slice_*.log; then
  printf '#!/bin/bash\nexport FERRY_EP_COMBINE_LL128=1\nexec %s "$@"\n' "$N" > /tmp/slice.sh && chmod +x /tmp/slice.sh
  call_ab slice_ 3 $N /tmp/slice.sh "" ep --mode ll --tokens 1,128,256,512 --check
fi
call_ab ar_ 2 $B $N "" allreduce --dtypes bf16 --sizes 1M,2M,4M,6M --algos auto --check
call_end
