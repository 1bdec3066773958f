# Session 19, call 1 (run(kind nvidia-h100-x2, carry [".deps"])): main with exp/source-rows merged (929c074).
# 1. The GPU tests of DispatchResult::source_rows (compiled and CPU-tested only in session 18).
# 2. Over UCX shared memory (2 virtual nodes, one GPU each): the hierarchical AllReduce's blocks per launch
#    (FERRY_HIERARCHICAL_BLOCKS 16/32/64) beside NCCL (NCCL_P2P_DISABLE=1), and FERRY_PROXY_STATS=1 once.
# 3. Session 16's next_sm_tune sweep (never run): the cross-node EP receive/send split over sm.
# 4. Own rows first at 9-12 SMs, copy engine share 0 vs 100 (the rule's edge, never measured).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 570
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
call_build_dir build-device "ferry-bench ferry_gpu_tests ferry_python"
M="mpirun --allow-run-as-root --bind-to none -np 2"; T=build-device/tests/ferry_gpu_tests; B=build-device/bench/ferry-bench
call_run rr_np2 90 $M $T --gtest_filter='EpOwnRowsFirst.*:*EpRankRows*'
export PYTHONPATH="$PWD/build-device/python${PYTHONPATH:+:$PYTHONPATH}"
call_run py_rr_np2 120 python3 -m torch.distributed.run --standalone --nproc-per-node 2 -m pytest -q \
  -p no:cacheprovider tests/python/test_gpu_ep_rank_rows.py
V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1"
for nb in 32 16 64 32; do
  call_run ar_b$nb 40 $M $V -x FERRY_HIERARCHICAL_BLOCKS=$nb $B allreduce --algos hierarchical --dtypes bf16 \
    --sizes 256K,1M,4M,16M,64M --csv $CALL_DIR/ar_b$nb.csv
  grep -h -E "hierarchical|nccl" $CALL_DIR/ar_b$nb.log | head -12
done
call_run ar_stats 40 $M $V -x FERRY_PROXY_STATS=1 $B allreduce --algos hierarchical --dtypes bf16 --sizes 1M,16M --no-nccl
tail -20 $CALL_DIR/ar_stats.log
V2="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
tune() {
  local mode="$1" name="$2" env=()
  [ -n "${3:-}" ] && env=(-x "$3")
  call_run "${mode}_$name" 60 $M $V2 "${env[@]}" $B ep --layout expanded --no-nccl --mode "$mode" --csv "$CALL_DIR/${mode}_$name.csv"
  [ -f "$CALL_DIR/${mode}_$name.csv" ] && python3 - "$CALL_DIR/${mode}_$name.csv" "${mode} ${3:-default}" <<'PY'
import csv, sys
rows = {r["op"]: float(r["ferry_us"]) for r in csv.DictReader(open(sys.argv[1]))}
print("%-44s" % sys.argv[2], "  ".join("%s %.1f" % (k, v) for k, v in sorted(rows.items())))
PY
}
tune ht default
for v in 16 18; do tune ht d$v FERRY_EP_DISPATCH_RECV_BLOCKS=$v; done
for v in 8 16; do tune ht c$v FERRY_EP_COMBINE_RECV_BLOCKS=$v; done
tune ht default2
E="ep --layout rank_rows --mode ht --own-rows-first --no-nccl"
for pc in 0 100; do
  call_run own_p$pc 60 $M -x FERRY_EP_OWN_ROWS_COPY_PERCENT=$pc $B $E --sms 9,10,11,12
  grep -h -E "^ht .*dispatch" $CALL_DIR/own_p$pc.log
done
tune ll default
for v in 33 99; do tune ll d$v FERRY_EP_DISPATCH_RECV_BLOCKS=$v; done
tune ll default2
call_end
