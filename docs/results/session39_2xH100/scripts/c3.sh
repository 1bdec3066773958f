# Session 39 c3 (final EP). run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~470 s.
#   base = the session's start 1182132; new = main 3883995 (exp/combine-chunk 2fc9a72 merged: the low-latency
#   combine's own 1024-column chunks on 2 ranks of one node up to 512 tokens per rank, NOTE [EP combine chunks]).
#   Trees: scripts/ab_trees.sh base=1182132 new=main
#   The EP checks (Ep*, 3 / 8 shared ranks, sanitizers), 4 shared ranks, 2x1 virtual nodes, the session's A/B,
#   the figures; then the dispatch's FERRY_EP_CHUNK_COLS=1024 at T=256 / 512 on new (information).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 560
{ nvidia-smi -q | grep -iE "bus id|serial number"; } > $CALL_DIR/host.txt 2>&1
call_base_new ferry_gpu_tests  # sets M, T, B, N, SAN
call_ep_checks $T  # Ep*, 3 / 8 shared ranks, memcheck / racecheck / synccheck
call_run shared_np4 60 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 $T \
  --gtest_filter='Ep/EpMatrix.*ll*:Ep.LowLatency*:Ep.IndexTypesAndApis*:Ep.TokensWithoutExperts:Ep.SkewAll*'
call_run ep_2x1 100 $M -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 $T --gtest_filter='Ep*'
grep -aq "FAILED  \]" $CALL_DIR/*.log && { echo "tests failed: no A/B"; call_end; exit 0; }
call_ab ll_ 3 $B $N "" ep --mode ll --tokens 1,128,256,512
call_ab ht_ 2 $B $N "" ep --mode ht --sms 24
call_run figures 40 $M -np 2 $N ep --mode ll --tokens 1,128,256,512 --route-ahead --check --csv $CALL_DIR/figures.csv
printf '#!/bin/bash\nFERRY_EP_CHUNK_COLS=1024 exec %s "$@"\n' "$N" > /tmp/dc1024.sh && chmod +x /tmp/dc1024.sh
call_ab dc1024_ 2 $N /tmp/dc1024.sh "" ep --mode ll --tokens 256,512
call_end
