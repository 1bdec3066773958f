# Session 17, call 1 (run(kind nvidia-h100-x2, carry [".deps"])): main bb447c9.
# 1. The Ep* suites on main's host-only mends of session 16 (not yet run on a GPU).
# 2. Rank-rows dispatch: the own-row / peer-row block split (NOTE [EP rank rows by role]) was swept for bf16 only;
#    sweep FERRY_EP_RANK_ROWS_LOCAL_BLOCKS for bf16 and fp8 at 24 and 48 SMs (NCCL off; the default twice).
# 3. Session 16's prepared next_sm_tune sweep (cross-node receive blocks over sm), as time allows.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 570
call_build_dir build-device "ferry-bench ferry_gpu_tests"
T=build-device/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none -np 2"; B=build-device/bench/ferry-bench
call_run ep_np2 70 $M $T --gtest_filter='Ep*'
call_run ep_2x1_sm 70 $M -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self $T --gtest_filter='Ep*'
# rr SMS NAME [KNOB=VALUE]: one rank-rows HT run, its rows on one line.
rr() {
  local sms="$1" name="$2" env=()
  [ -n "${3:-}" ] && env=(-x "$3")
  call_run "rr_${sms}_$name" 40 $M "${env[@]}" $B ep --layout rank_rows --no-nccl --mode ht --sms "$sms" --csv "$CALL_DIR/rr_${sms}_$name.csv"
  python3 - "$CALL_DIR/rr_${sms}_$name.csv" "sms=$sms ${3:-default}" <<'PY'
import csv, sys
rows = {r["op"]: float(r["ferry_us"]) for r in csv.DictReader(open(sys.argv[1]))}
print("%-48s" % sys.argv[2], "  ".join("%s %.1f" % (k, v) for k, v in sorted(rows.items())))
PY
}
for sms in 24 48; do
  rr $sms default
  for v in 4 6 10 12; do rr $sms l$v FERRY_EP_RANK_ROWS_LOCAL_BLOCKS=$v; done
  rr $sms default2
done
rr 16 default
rr 16 l4 FERRY_EP_RANK_ROWS_LOCAL_BLOCKS=4
rr 32 default
rr 32 l10 FERRY_EP_RANK_ROWS_LOCAL_BLOCKS=10
# 3. (session 16's next_sm_tune.sh without its tests) HT over sm, 2 virtual nodes, receive blocks of each half.
V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
tune() {
  local name="$1" env=()
  [ -n "${2:-}" ] && env=(-x "$2")
  call_run "sm_ht_$name" 50 $M $V "${env[@]}" $B ep --layout expanded --no-nccl --mode ht --csv "$CALL_DIR/sm_ht_$name.csv"
  [ -f "$CALL_DIR/sm_ht_$name.csv" ] && python3 - "$CALL_DIR/sm_ht_$name.csv" "sm ht ${2:-default}" <<'PY'
import csv, sys
rows = {r["op"]: float(r["ferry_us"]) for r in csv.DictReader(open(sys.argv[1]))}
print("%-48s" % sys.argv[2], "  ".join("%s %.1f" % (k, v) for k, v in sorted(rows.items())))
PY
}
tune default
for v in 6 16; do tune d$v FERRY_EP_DISPATCH_RECV_BLOCKS=$v; done
for v in 4 16; do tune c$v FERRY_EP_COMBINE_RECV_BLOCKS=$v; done
tune default2
call_end
