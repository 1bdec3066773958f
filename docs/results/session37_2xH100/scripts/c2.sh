# Session 37 c2: base = main c7e5c8c; lay = exp/staged-layout-fast 1a07700 (the staged receive's layout: odd bitmap
# stride, offsets as le x capacity); pack = exp/packed-boxes (lay + tagged boxes of two 16-bit ids an entry, no
# barrier or release, weights in chunk 0's staging row). GPU tests and sanitizers on pack; A/B of each against base.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 480
{ nvidia-smi -q | grep -iE "bus id|serial number"; } > $CALL_DIR/host.txt 2>&1
call_build_trees ferry-bench base lay pack+ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"
T=.ab/pack/build/tests/ferry_gpu_tests
B="$ROOT/.ab/base/build/bench/ferry-bench"; L="$ROOT/.ab/lay/build/bench/ferry-bench"; P="$ROOT/.ab/pack/build/bench/ferry-bench"
SAN="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
call_run ep_pack 100 $M -np 2 $T --gtest_filter='Ep*'
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/ep_pack.log | head -12
call_ab lay_ 3 $B $L "" ep --mode ll --tokens 1,128,256,512
call_ab pack_ 3 $B $P "" ep --mode ll --tokens 1,128,256,512
call_run check 40 $M -np 2 $P ep --mode ll --tokens 1,128,512 --route-ahead --check --csv ''
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
call_end
