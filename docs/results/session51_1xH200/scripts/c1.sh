# Session 51 c1 on one H200: run(kind nvidia-h200, carry [".deps", ".ab"]), ~450 s. First GPU runs of what session
# 50 built after its device time: tree rdy = exp/ll-ready-words fdca3be (FERRY_EP_NET_READY_PREFETCH: a send warp
# asks the L2 for its next item first), main's ferry-bench from this checkout (pcie-ce is new; pcie-peer moved onto
# bench/host_segment.hpp; pcie-latency onto bench_common.hpp's download). 2 virtual nodes on the ONE GPU under MPS
# over UCX shared memory, --no-nccl: CORRECTNESS AND A DIRECTION ONLY.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 ${C1_BUDGET:-450}
(call_build_dir $ROOT/build-main ferry-bench > $CALL_DIR/build_main_dir.log 2>&1) &
call_build_trees "ferry-bench ferry_gpu_tests" rdy
wait
cat $CALL_DIR/build_main_dir.log
MAIN=$ROOT/build-main/bench/ferry-bench R=$ROOT/.ab/rdy/build
call_run pcie_latency 40 mpirun --allow-run-as-root --bind-to none -np 1 $MAIN pcie-latency --sms 1,2,8 --bytes 256M
tail -5 $CALL_DIR/pcie_latency.log
call_mps_start 2
call_virtual_nodes
LL_TESTS="Ep.LowLatency*:Ep/EpMatrix.*ll*:Ep.Staged*:Ep.BadExpert*:Ep.ZeroTokenRanks:EpRestricted*"
call_run rdy_ll_2x1 120 $M2 $SM $R/tests/ferry_gpu_tests --gtest_filter="$LL_TESTS"
grep -a "PASSED\|FAILED  \]\|Failure\|mismatch\|timed out" $CALL_DIR/rdy_ll_2x1.log | head -6
call_run rdy_one_node 60 $M2 -x FERRY_TEST_SHARE_GPUS=1 $R/tests/ferry_gpu_tests \
  --gtest_filter="Ep.LowLatencyOnOneSendBlock"
grep -a "PASSED\|FAILED  \]\|Failure\|timed out" $CALL_DIR/rdy_one_node.log | head -4
# Probes first (bench code submitted on main, never run on a GPU): 2 ranks sharing the GPU, then pcie-latency alone.
call_run pcie_ce 60 $M2 -x FERRY_TEST_SHARE_GPUS=1 $MAIN pcie-ce --bytes 1M --pieces 1,2,4,8
call_run pcie_ce_4m 60 $M2 -x FERRY_TEST_SHARE_GPUS=1 $MAIN pcie-ce --bytes 4M --pieces 1,4,16
call_run pcie_peer 60 $M2 -x FERRY_TEST_SHARE_GPUS=1 $MAIN pcie-peer --sms 8,32,66 --bytes 16M --item-bytes 1792
tail -8 $CALL_DIR/pcie_ce.log $CALL_DIR/pcie_ce_4m.log; grep -hE "^(own|peer)_" $CALL_DIR/pcie_peer.log
# rdy's default split (base) against the prefetch there and on 1 / 2 send blocks with batches of 4.
configs=("half_p1=$R/bench/ferry-bench@-x FERRY_EP_NET_READY_PREFETCH=1")
for sbp in 1:4:0 1:4:1 2:4:0 2:4:1; do
  IFS=: read -r s b pf <<< "$sbp"
  configs+=("s${s}_b${b}_p$pf=$R/bench/ferry-bench@-x FERRY_EP_DISPATCH_RECV_BLOCKS=$((66 - s)) \
-x FERRY_EP_NET_READY_BATCH=$b -x FERRY_EP_NET_READY_PREFETCH=$pf")
done
call_sweep ll_ 2 $R/bench/ferry-bench "$SM" "ep --mode ll --aligned --check --tokens 128,512 --iters 30 --warmup 5 \
--no-nccl" "${configs[@]}"
grep -h "check:" $CALL_DIR/ab/*.log | sort | uniq -c
call_mps_stop
call_end
