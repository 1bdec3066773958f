# Session 50 c2 on one H200: run(kind nvidia-h200, carry [".deps", ".ab"]), ~400 s. Trees (scripts/ab_trees.sh
# main=main rdy=exp/ll-ready-words): does a send on few SMs keep the GPU's queue of host writes short enough for
# ready words (NOTE [EP across nodes: ready words]) to overlap the low-latency halves over shared memory?
# Session 49 c6 (pcie-latency): 1 writer SM stores 43 GB/s into host memory with a fence of 0.7 us, 8 SMs 52 GB/s
# with 29 us. So: pcie-latency at 1-8 writer SMs, then main against rdy with its send grid on 2 / 4 / 8 / 16 of
# the 66 SMs a rank (FERRY_EP_DISPATCH_RECV_BLOCKS = the rest) and at its default half. 2 virtual nodes on the ONE
# GPU under MPS over sm, --check, --no-nccl, 3 rounds in turn: A DIRECTION ONLY (both ranks share one GPU's link).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 ${C2_BUDGET:-500}
call_build_trees ferry-bench main rdy
B=$ROOT/.ab
call_run latency 60 mpirun --allow-run-as-root --bind-to none -np 1 $B/main/build/bench/ferry-bench pcie-latency \
  --sms 1,2,3,4,6,8 --bytes 256M
grep -aA8 "writer SMs" $CALL_DIR/latency.log
call_mps_start 2
call_virtual_nodes
dir=$CALL_DIR/ab
mkdir -p $dir
configs="rdy_half:0 rdy_s2:64 rdy_s4:62 rdy_s8:58 rdy_s16:50"
for r in 1 2 3; do
  [ "$(call_left)" -lt 60 ] && { echo "round $r skipped (time)"; break; }
  args="ep --mode ll --aligned --check --tokens 128,512 --iters 30 --warmup 5 --no-nccl"
  timeout 90 $M2 $SM $B/main/build/bench/ferry-bench $args --csv $dir/main_$r.csv > $dir/main_$r.log 2>&1 ||
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
grep -l "rror\|timed out" $dir/*.log | head
call_mps_stop
call_end
