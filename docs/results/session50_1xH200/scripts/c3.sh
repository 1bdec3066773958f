# Session 50 c3 on one H200: run(kind nvidia-h200, carry [".deps", ".ab"]), ~420 s. Trees (scripts/ab_trees.sh
# rdy=exp/ll-ready-words mut=exp/ll-ready-words+docs/results/session50_1xH200/scripts/ready_meta_mutant.patch):
# c2 found ready words (NOTE [EP across nodes: ready words]) wrong where the send grid is small: a chunk c > 0
# placed before its token's chunk 0 read the box's stale meta. rdy now waits for chunk 0's word too, and the new
# test Ep.LowLatencyOnOneSendBlock (send grid of one block) must pass on rdy and fail on mut (rdy without that
# wait). Then the low-latency tests as 2x1 over sm, and c2's sweep again: main against rdy with its send grid on
# 1 / 2 / 4 / 8 / 16 of the 66 SMs a rank and at its default half. 2 virtual nodes on the ONE GPU under MPS over
# sm, --check, --no-nccl, 3 rounds in turn: A DIRECTION ONLY (both ranks share one GPU's link and write queue).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 ${C3_BUDGET:-540}
# main: this checkout (main), built beside the trees (three trees and the results pass the carry's 64 MiB)
(call_build_dir $ROOT/build-main ferry-bench > $CALL_DIR/build_main_dir.log 2>&1) &
call_build_trees ferry-bench rdy+ferry_gpu_tests mut+ferry_gpu_tests
wait
cat $CALL_DIR/build_main_dir.log
B=$ROOT/.ab
MAIN_BENCH=$ROOT/build-main/bench/ferry-bench
call_mps_start 2
call_virtual_nodes
call_run new_test 60 $M2 $SM $B/rdy/build/tests/ferry_gpu_tests --gtest_filter="Ep.LowLatencyOnOneSendBlock"
grep -a "PASSED\|FAILED  \]\|Failure\|timed out" $CALL_DIR/new_test.log | head -4
call_run mutant 60 $M2 $SM $B/mut/build/tests/ferry_gpu_tests --gtest_filter="Ep.LowLatencyOnOneSendBlock"
grep -a "PASSED\|FAILED  \]\|mismatch\|timed out" $CALL_DIR/mutant.log | head -4
call_run ll_2x1 120 $M2 $SM $B/rdy/build/tests/ferry_gpu_tests \
  --gtest_filter="Ep.LowLatency*:Ep/EpMatrix.*ll*:Ep.Staged*:Ep.BadExpert*:Ep.ZeroTokenRanks:EpRestricted*"
grep -a "PASSED\|FAILED  \]\|Failure\|timed out" $CALL_DIR/ll_2x1.log | head -6
dir=$CALL_DIR/ab
mkdir -p $dir
configs="rdy_half:0 rdy_s1:65 rdy_s2:64 rdy_s4:62 rdy_s8:58 rdy_s16:50"
for r in 1 2 3; do
  [ "$(call_left)" -lt 50 ] && { echo "round $r skipped (time)"; break; }
  args="ep --mode ll --aligned --check --tokens 128,512 --iters 30 --warmup 5 --no-nccl"
  timeout 90 $M2 $SM $MAIN_BENCH $args --csv $dir/main_$r.csv > $dir/main_$r.log 2>&1 ||
    echo "main round $r failed"
  for cfg in $configs; do
    name=${cfg%%:*} recv=${cfg#*:}
    knob=""
    [ "$recv" != 0 ] && knob="-x FERRY_EP_DISPATCH_RECV_BLOCKS=$recv"
    timeout 90 $M2 $SM $knob $B/rdy/build/bench/ferry-bench $args --csv $dir/ab_${name}_new_$r.csv \
      > $dir/${name}_$r.log 2>&1 || echo "$name round $r failed"
    cp $dir/main_$r.csv $dir/ab_${name}_base_$r.csv
  done
  echo "round $r done ($(call_elapsed) s)"
done
for cfg in $configs; do
  name=${cfg%%:*}
  echo "== main / $name"
  python3 $ROOT/scripts/ab_compare.py $dir ${name}_ | grep -E "^ferry" | tee $dir/table_$name.txt
done
grep -h "check:" $dir/*.log | sort | uniq -c
call_mps_stop
call_end
