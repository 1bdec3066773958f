# Session 42 c4 (session 39's next_pending.sh). run(kind nvidia-h200-x2, carry [".deps", ".ab"]), ~400 s.
#   Two small dispatch branches from sessions 37-38, rebased on main in session 39 (each compiles; none GPU-run;
#   exp/record-received-row is superseded by main's record_token_weight, whose SASS is main's before it):
#   we = exp/weights-load-early 77c6272 (staged send: chunk 0's weights loaded beside the ids),
#   cc = exp/copy-chunk-to-rows 62160dd (the direct and staged receives share the chunk copy; SASS differs).
# Before (here): scripts/ab_trees.sh base=main we=exp/weights-load-early cc=exp/copy-chunk-to-rows
#   (both rebased on main e4611d7 in session 42)
# Merge a branch only if its Ep* pass and no case of its A/B reads slower (> 1.01 in both rounds' medians).
# Before merging one: call_ep_checks on its tree (the three sanitizers), as every dispatch kernel change since session 35.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 540
call_build_trees ferry-bench base we+ferry_gpu_tests cc+ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"; B="$ROOT/.ab/base/build/bench/ferry-bench"
for t in we cc; do
  call_run ep_$t 100 $M -np 2 .ab/$t/build/tests/ferry_gpu_tests --gtest_filter='Ep*'
  call_run ep_${t}_np3 60 $M -np 3 -x FERRY_TEST_SHARE_GPUS=1 .ab/$t/build/tests/ferry_gpu_tests \
    --gtest_filter='Ep/EpMatrix.*ll*:Ep.Staged*:Ep.ZeroTokenRanks'
done
for t in we cc; do
  grep -aq "FAILED  \]" $CALL_DIR/ep_$t*.log && { echo "$t: tests failed, no A/B"; continue; }
  call_ab ${t}_ 2 $B "$ROOT/.ab/$t/build/bench/ferry-bench" "" ep --mode ll --tokens 1,128,256,512
done
call_end
