# Session 33 c5. run(kind nvidia-h100-x2, carry [".deps", ".ab"]). Trees: scripts/ab_trees.sh base=1e4d729 new=d455d70
# (main before / after the two host rules of c4: rank rows never split by role when quantizing; staged low latency
# by default for fp8 buffers whose rows fit 4 MiB). Tests on new (staged fp8 is now the default path), then the
# same-run A/Bs, then issue 23's figures on new (high throughput with halves, --check, route ahead, --ht-quantize;
# low latency 3 runs).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 575
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader | sort | uniq -c
call_base_new ferry_gpu_tests  # sets M, T, B, N, SAN (scripts/device_call.sh)
call_run ep_np2 120 $M -np 2 $T --gtest_filter='Ep*'
call_run shared_np3 60 $M -np 3 -x FERRY_TEST_SHARE_GPUS=1 $T \
  --gtest_filter='Ep/EpMatrix.*ll*:Ep.StagedAndDirectLowLatencyAgree:Ep.ZeroTokenRanks:EpRankRowsCases.*fp8*'
call_run memcheck 60 $M -np 2 $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter='Ep/EpMatrix.*ll_fp8*:EpRankRowsCases.*fp8*'
call_ab rrq_ 2 $B $N "" ep --mode ht --ht-quantize --sms 8,24,48
call_ab ll_ 3 $B $N "" ep --mode ll --tokens 1,128,512
call_ab llfp8_ 2 $B $N "" ep --mode ll --tokens 1,128,512 --dispatch-types fp8
call_run ep_table 90 $M -np 2 $N ep --mode ht --halves --check --route-ahead --ht-quantize --csv $CALL_DIR/ep_ht_2xH100_2ranks.csv
grep -h -E "^(ht|ll) |check:" $CALL_DIR/ep_table.log | head -24
for r in 1 2 3; do
  call_run ep_ll_$r 30 $M -np 2 $N ep --mode ll --tokens 1,128,512 --route-ahead --check --csv $CALL_DIR/ep_ll_2xH100_2ranks_$r.csv
  grep -h -E "^ll " $CALL_DIR/ep_ll_$r.log | head -12
done
call_end
