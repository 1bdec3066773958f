# For the next session, on 2 GPUs (preferred: NCCL beside) or one H200 (MPS, a direction): run(kind ..., carry
# [".deps", ".ab"]), ~560 s. Trees: scripts/ab_trees.sh base=main new=exp/ll-paced-waves
# Paced waves (NOTE [EP across nodes: paced waves], branch exp/ll-paced-waves, NOT yet GPU-run when written): the
# low-latency dispatch over UCX shared memory writes its tokens in FERRY_EP_NET_LL_WAVES (4) waves, each range's
# fence waiting for one wave's bytes, and the receive grid places ranges beside the send. One virtual node per GPU
# (or per rank on the one GPU): --check, Ep* as 2x1 over sm, the low-latency tests as 4x1 (shared ranks), then the
# A/B base / new over sm at T=128 and 512 (3 rounds; NCCL beside on 2 GPUs), the waves 2 / 8 on the new binary, and
# high throughput (its kernels' code should be unchanged) one round.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next49 ${NEXT49_BUDGET:-560}
call_build_trees ferry-bench base new+ferry_gpu_tests
call_mps_start 2  # one GPU: the ranks share it under MPS, and NCCL (it refuses two ranks on one GPU) stays out
NCCL_FLAG=""
[ "$CALL_MPS" = 1 ] && NCCL_FLAG="--no-nccl"
call_virtual_nodes
B=$ROOT/.ab
call_run new_check 60 $M2 $SM $B/new/build/bench/ferry-bench ep --mode ll --aligned --check --tokens 1,128,512 \
  --iters 20 --warmup 3 --no-nccl
grep -aE "check|rror|timed out" $CALL_DIR/new_check.log | head -6
call_run sm_2x1 170 $M2 $SM $B/new/build/tests/ferry_gpu_tests --gtest_filter="Ep*"
grep -a "FAILED  \]\|Failure\|timed out" $CALL_DIR/sm_2x1.log | head -8
call_run sm_4x1 90 $M -np 4 $SM -x FERRY_TEST_SHARE_GPUS=1 $B/new/build/tests/ferry_gpu_tests \
  --gtest_filter="Ep.LowLatency*:Ep/EpMatrix.*ll*:Ep.BadExpert*:Ep.ZeroTokenRanks"
grep -a "FAILED  \]\|Failure\|timed out" $CALL_DIR/sm_4x1.log | head -8
CALL_MPIRUN="$M" call_ab sm_ll_ 3 "$B/base/build/bench/ferry-bench" "$B/new/build/bench/ferry-bench" \
  "$SM" ep --mode ll --aligned --check --tokens 128,512 --iters 30 --warmup 5 $NCCL_FLAG
for waves in 2 8; do
  call_run waves_$waves 60 $M2 $SM -x FERRY_EP_NET_LL_WAVES=$waves $B/new/build/bench/ferry-bench ep --mode ll \
    --aligned --check --tokens 128,512 --iters 30 --warmup 5 $NCCL_FLAG
  grep -aE "^ll .*dispatch|check" $CALL_DIR/waves_$waves.log | sed "s/^/waves=$waves /"
done
CALL_MPIRUN="$M" call_ab sm_ht_ 1 "$B/base/build/bench/ferry-bench" "$B/new/build/bench/ferry-bench" \
  "$SM" ep --mode ht --aligned --check --iters 10 --warmup 3 $NCCL_FLAG
grep -h "check:" $CALL_DIR/ab/*.log | sort | uniq -c
call_mps_stop
call_end
