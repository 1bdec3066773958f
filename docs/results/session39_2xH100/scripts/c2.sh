# Session 39 c2. run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~420 s.
#   base = main; new = exp/combine-chunk f4c0930: the low-latency combine inside one node may cut rows into chunks of
#   its own (FERRY_EP_COMBINE_CHUNK_COLS, NOTE [EP combine chunks]); default unchanged (the dispatch's chunks), so
#   base/new must read 1.00. Then the knob on new's binary: 256 / 512 / 1024 columns for the combine alone (c1: the
#   dispatch's FERRY_EP_CHUNK_COLS=512 made the combine at T=256 0.944 but the dispatch 1.12-1.33 slower).
# Before (here): scripts/ab_trees.sh base=main new=exp/combine-chunk
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 560
call_base_new ferry_gpu_tests  # sets M, T, B, N, SAN
call_run ep_tests 100 $M -np 2 $T --gtest_filter='Ep*'
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/ep_tests.log | head -12
for n in 3 8; do
  call_run shared_np${n}_c512 90 $M -np $n -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_EP_COMBINE_CHUNK_COLS=512 $T \
    --gtest_filter='Ep/EpMatrix.*ll*:Ep.ZeroTokenRanks:Ep.Staged*:Ep.LowLatencyCombineChunksAgree'
done
call_run ep_ll_c256 60 $M -np 2 -x FERRY_EP_COMBINE_CHUNK_COLS=256 $T \
  --gtest_filter='Ep/EpMatrix.*ll*:Ep.LowLatency*:Ep.Staged*:Ep.TokensWithoutExperts:Ep.SkewAll*'
for tool in memcheck racecheck; do
  call_run ${tool}_c512 60 $M -np 2 -x FERRY_EP_COMBINE_CHUNK_COLS=512 $SAN --tool $tool --error-exitcode 86 $T \
    --gtest_filter='Ep.StagedLowLatencyOnFewSms:Ep.LowLatencyGraphReplayWithNewRouting'
done
grep -aq "FAILED  \]" $CALL_DIR/*.log && { echo "tests failed: no A/B"; call_end; exit 0; }
call_ab ll_ 2 $B $N "" ep --mode ll --tokens 1,128,256,512
for cols in 1024 512 256; do
  printf '#!/bin/bash\nFERRY_EP_COMBINE_CHUNK_COLS=%s exec %s "$@"\n' "$cols" "$N" > /tmp/cc$cols.sh
  chmod +x /tmp/cc$cols.sh
  call_ab cc${cols}_ 3 $N /tmp/cc$cols.sh "" ep --mode ll --tokens 128,256,512
done
call_end
