# Session 37 c5 (the last call): base = c7e5c8c (the session's start), cur = main ba5f7bf (run in c4), new =
# exp/stage-lines (cur + staging rows in whole 128-byte lines). The GPU tests and sanitizers on new; A/B base -> new
# (the session's net) and cur -> new (the lines alone), 3 rounds each; the figures run on new. Measured only (not
# merged this session): ord = exp/combine-row-first (new + the combine send item's target row before its gather),
# A/B new -> ord.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 480
{ nvidia-smi -q | grep -iE "bus id|serial number"; } > $CALL_DIR/host.txt 2>&1
call_build_trees ferry-bench base cur new+ferry_gpu_tests ord
M="mpirun --allow-run-as-root --bind-to none"
T=.ab/new/build/tests/ferry_gpu_tests
B="$ROOT/.ab/base/build/bench/ferry-bench"; C="$ROOT/.ab/cur/build/bench/ferry-bench"; N="$ROOT/.ab/new/build/bench/ferry-bench"
SAN="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
call_run ep_new 100 $M -np 2 $T --gtest_filter='Ep*'
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/ep_new.log | head -12
for n in 3 8; do
  call_run shared_np$n 60 $M -np $n -x FERRY_TEST_SHARE_GPUS=1 $T \
    --gtest_filter='Ep/EpMatrix.*ll*:Ep.ZeroTokenRanks:Ep.BadExpert*:Ep.Staged*'
done
call_run memcheck 40 $M -np 2 $SAN --tool memcheck --error-exitcode 86 $T \
  --gtest_filter='Ep.StagedLowLatencyOnFewSms:Ep.HandleReuse:Ep.BadExpertIdOnOneRank'
for tool in racecheck synccheck; do
  call_run $tool 40 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T \
    --gtest_filter='Ep.StagedLowLatencyOnFewSms:Ep.LowLatencyGraphReplayWithNewRouting'
done
call_ab lines_ 3 $C $N "" ep --mode ll --tokens 1,128,256,512
call_ab ll_ 3 $B $N "" ep --mode ll --tokens 1,128,256,512
call_run figures 40 $M -np 2 $N ep --mode ll --tokens 1,128,256,512 --route-ahead --check --csv $CALL_DIR/figures.csv
call_ab ord_ 3 $N "$ROOT/.ab/ord/build/bench/ferry-bench" "" ep --mode ll --tokens 1,128,256,512
call_end
