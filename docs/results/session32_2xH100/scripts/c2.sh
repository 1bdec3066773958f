# Session 32, call 2. run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~330 s.
# Branch exp/layout-add-batched (NOTE [EP layout add loads]): the layout's second kernel issues every load of a
# token before any store (it waited an L2 round trip per load: 2K + W of them) and sums the lower blocks' totals
# 16 loads at a time. Only layout_add_lower_blocks_kernel changes. Expected: ~2-3 us off EpBuffer::route and every
# high-throughput dispatch of more than 1024 tokens (c1 showed the look-back's third form gains nothing).
# Before (here): rm -rf .ab; for t in base:main new:exp/layout-add-batched; do d=.ab/${t%%:*}; mkdir -p $d;
#   git archive ${t#*:} | tar -x -C $d; rm -rf $d/docs; done
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 570
# c1's rounds 2-3 read up to 1.7x slower on both trees (NCCL steady): the clocks, to see whether the GPUs throttle.
clocks() { nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader; }
nvidia-smi -q -d PERFORMANCE,CLOCK > $CALL_DIR/clocks_start.txt 2>&1
call_base_new ferry_gpu_tests  # sets M, T, B, N, SAN (scripts/device_call.sh)
LAYOUT='Ep.FusedAndSeparateLayoutAgree:Ep.BadExpertIds*:Ep.Route*:EpRankRowsCases.RouteAhead'
call_run layout_np2 60 $M -np 2 $T --gtest_filter="$LAYOUT"
( while true; do clocks; sleep 5; done ) > $CALL_DIR/clocks_ab.txt 2>&1 &
CLOCKS_PID=$!
call_ab ht_ 3 $B $N "" ep --mode ht --sms 8,24,48 --route-ahead
kill $CLOCKS_PID
grep -h "route ahead" $CALL_DIR/ab/ht_*.log | sort | uniq -c | head -12
call_run ep_np2 150 $M -np 2 $T --gtest_filter='Ep*'
call_run shared_np4 90 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter="$LAYOUT"
for tool in memcheck racecheck synccheck; do
  call_run $tool 60 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T \
    --gtest_filter='Ep.BadExpertIdsAcrossLayoutBlocks:Ep.RouteReplacesTheLayout'
done
SM="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
call_run ep_sm 90 $M -np 2 $SM $T --gtest_filter='Ep*'
nvidia-smi -q -d PERFORMANCE,CLOCK > $CALL_DIR/clocks_end.txt 2>&1
call_end
