# Session 32, call 3. run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~480 s.
# Branch exp/fp8-wide-stores (NOTE [EP fp8 wide stores]): the quantizer takes 16 columns a lane and stores 16
# bytes a lane toward each destination (was 8), scale groups of 8 lanes; outputs bit for bit the same. Base: main
# with exp/layout-add-batched (c2) merged. fp8 send at 24 SMs moved 263 GB/s over NVLink against bf16's 295
# (ep-notes, rank rows): if the 8-byte stores were the difference, every quantizing dispatch gains.
# Before (here): rm -rf .ab; for t in base:main new:exp/fp8-wide-stores; do d=.ab/${t%%:*}; mkdir -p $d;
#   git archive ${t#*:} | tar -x -C $d; rm -rf $d/docs; done
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 570
clocks() { nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader; }
call_base_new ferry_gpu_tests  # sets M, T, B, N, SAN (scripts/device_call.sh)
call_run quant_np2 60 $M -np 2 $T --gtest_filter='Ep.Fp8InputPassThrough:EpRankRows*:Ep.LowLatency*'
( while true; do clocks; sleep 5; done ) > $CALL_DIR/clocks_ab.txt 2>&1 &
CLOCKS_PID=$!
call_ab ht_ 2 $B $N "" ep --mode ht --sms 8,24,48 --route-ahead
call_ab ll_ 3 $B $N "" ep --mode ll --tokens 1,128,512
kill $CLOCKS_PID
call_run check_new 60 $M -np 2 $N ep --mode ll --tokens 1,128,512 --check
call_run ep_np2 150 $M -np 2 $T --gtest_filter='Ep*'
call_run memcheck 60 $M -np 2 $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter='Ep.Fp8InputPassThrough'
SM="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
call_run ep_sm 90 $M -np 2 $SM $T --gtest_filter='Ep*'
call_end
