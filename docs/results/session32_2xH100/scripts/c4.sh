# Session 32, call 4. run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~350 s.
# Branch exp/records-once (NOTE [EP record once]): the direct dispatch stores a token's routing record with its
# first chunk only (at T=128, 1024-column chunks: 7 small record stores per token and destination before), and
# a later chunk's receiving warp also acquires chunk 0's ready word. Base: main with c2 and c3 merged.
# c3 showed 16-byte stores in place of 8-byte ones took 3-5% off the quantizing low-latency dispatch; the
# records are as many store instructions toward the peer as fp8's data at T=128.
# Before (here): rm -rf .ab; for t in base:main new:exp/records-once; do d=.ab/${t%%:*}; mkdir -p $d;
#   git archive ${t#*:} | tar -x -C $d; rm -rf $d/docs; done
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 570
call_base_new ferry_gpu_tests  # sets M, T, B, N, SAN (scripts/device_call.sh)
LL='Ep.StagedAndDirectLowLatencyAgree:Ep.LowLatency*:Ep.SkewAllTokensToOneExpertOrOneRank'
call_run ll_np2 90 $M -np 2 $T --gtest_filter="$LL"
call_ab ll_ 4 $B $N "" ep --mode ll --tokens 1,128,512
call_ab ht_ 2 $B $N "" ep --mode ht --sms 24 --layout expanded
call_run check_new 60 $M -np 2 $N ep --mode ll --tokens 1,128,512 --check
call_run ep_np2 150 $M -np 2 $T --gtest_filter='Ep*'
call_run shared_np3 120 $M -np 3 -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter="$LL"
for tool in memcheck racecheck synccheck; do
  call_run $tool 60 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter='Ep.StagedAndDirectLowLatencyAgree'
done
call_end
