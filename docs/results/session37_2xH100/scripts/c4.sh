# Session 37 c4: base = c7e5c8c (the session's start), new = main (c2's tagged boxes and receive layout, c3's 8 MiB
# staging bound). The GPU tests and sanitizers on new, the session's low-latency A/B (3 rounds), the figures run
# (--route-ahead --check), then chunk sizes on new by the knob: FERRY_EP_CHUNK_COLS=512 against the default 1024 at
# T=128, =1024 against the default 2048 at T=256 / 512 (3 rounds each, alternating).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 480
{ nvidia-smi -q | grep -iE "bus id|serial number"; } > $CALL_DIR/host.txt 2>&1
call_base_new ferry_gpu_tests  # sets M, T, B, N, SAN
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
call_ab ll_ 3 $B $N "" ep --mode ll --tokens 1,128,256,512
call_run figures 40 $M -np 2 $N ep --mode ll --tokens 1,128,256,512 --route-ahead --check --csv $CALL_DIR/figures.csv
chunk_ab() {  # TAG COLS TOKENS
  for r in 1 2 3; do
    timeout 60 $M -np 2 $N ep --mode ll --tokens $3 --csv $CALL_DIR/ab/ab_$1base_$r.csv > $CALL_DIR/ab/$1base_$r.log 2>&1
    timeout 60 $M -np 2 -x FERRY_EP_CHUNK_COLS=$2 $N ep --mode ll --tokens $3 --csv $CALL_DIR/ab/ab_$1new_$r.csv \
      > $CALL_DIR/ab/$1new_$r.log 2>&1
  done
  python3 scripts/ab_compare.py $CALL_DIR/ab $1 2>&1 | grep -E "^(ferry|nccl)" | tee $CALL_DIR/ab/table_$1.txt
  echo "chunks $1 done ($(call_elapsed) s)"
}
chunk_ab c512_ 512 128
chunk_ab c1024_ 1024 256,512
call_end
