# Session 36, c3. run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~420 s.
#   base = main c86c629; new = exp/staged-receiver-layout: c2's staged dispatch (59792dc), then the routing boxes
#   from the last send block so block 0's layout runs beside them, and bf16 staged too where its rows fit (4 MiB).
# Before (here): scripts/ab_trees.sh base=main new=exp/staged-receiver-layout
# (The direct dispatch's kernels compile to base's SASS up to static shared-memory offsets, checked here with
# cuobjdump: high throughput is not A/B'd.)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 540
{ nvidia-smi -q | grep -iE "bus id|serial number"; } > $CALL_DIR/host.txt 2>&1
call_base_new ferry_gpu_tests  # sets M, T, B, N, SAN
call_run ep_new 120 $M -np 2 $T --gtest_filter='Ep*'
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/ep_new.log | head -12
call_run check 40 $M -np 2 $N ep --mode ll --tokens 1,128,256,512 --check --csv ''
grep -ai "mismatch\|fail\|error" $CALL_DIR/check.log | head -5
call_ab ll_ 3 $B $N "" ep --mode ll --tokens 1,128,512
for n in 3 8; do
  call_run shared_np$n 80 $M -np $n -x FERRY_TEST_SHARE_GPUS=1 $T \
    --gtest_filter='Ep/EpMatrix.*ll*:Ep.ZipfSkew:Ep.ZeroTokenRanks:Ep.BadExpert*:Ep.Staged*'
done
for tool in memcheck racecheck synccheck; do
  call_run $tool 60 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T \
    --gtest_filter='Ep.StagedLowLatencyOnFewSms:Ep.LowLatencyGraphReplayWithNewRouting'
done
call_end
