# Session 50 c6 on one H200: run(kind nvidia-h200, carry [".deps", ".ab"]), ~300 s (the session's last device
# time). Tree: scripts/ab_trees.sh rdy=exp/ll-ready-words (8b548f0: FERRY_EP_NET_READY_BATCH, items a send warp
# writes before one system fence and their ready words). c3/c5: with a fence an item, a send grid of 1 / 2 blocks
# made the fp8 dispatch 2.2 / 1.5x slower (each fence waits behind the GPU's queued host writes: ~18 us with 2
# writer SMs). Here: Ep.LowLatencyOnOneSendBlock (batches 1 and 3) as 2x1 over sm, then rdy at its default
# split (base) against send grids of 1 / 2 / 4 / 8 blocks with batches of 4, and 1 block with a fence an item.
# 2 virtual nodes on the ONE GPU under MPS: A DIRECTION ONLY.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 ${C6_BUDGET:-300}
call_build_trees "ferry-bench ferry_gpu_tests" rdy
R=$ROOT/.ab/rdy/build
call_mps_start 2
call_virtual_nodes
call_run new_test 60 $M2 $SM $R/tests/ferry_gpu_tests --gtest_filter="Ep.LowLatencyOnOneSendBlock"
grep -a "PASSED\|FAILED  \]\|Failure\|mismatch\|timed out" $CALL_DIR/new_test.log | head -4
configs=()
for s in 1 2 4 8; do
  configs+=("s${s}_b4=$R/bench/ferry-bench@-x FERRY_EP_DISPATCH_RECV_BLOCKS=$((66 - s)) -x FERRY_EP_NET_READY_BATCH=4")
done
configs+=("s1_b1=$R/bench/ferry-bench@-x FERRY_EP_DISPATCH_RECV_BLOCKS=65")
call_sweep ll_ 2 $R/bench/ferry-bench "$SM" "ep --mode ll --aligned --check --tokens 128,512 --iters 30 --warmup 5 --no-nccl" \
  "${configs[@]}"
grep -h "check:" $CALL_DIR/ab/*.log | sort | uniq -c
call_mps_stop
call_end
