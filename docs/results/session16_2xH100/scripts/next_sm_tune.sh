# Prepared in session 16 for the next one (not run): the receive/send split of the cross-node EP kernels over
# shared memory, never swept (EpBuffer gives each half num_sms / 2 across nodes). Session 16's table reads high
# throughput over sm at 0.79 / 0.74x NCCL (dispatch bf16 / fp8; combine 1.03x) although each dispatch half alone
# takes 1747 / 1778 us against 3292 for the call: the halves barely overlap (the GPU's writes into the peer's mapped
# landing buffer and its reads from its own both cross PCIe). So the split is the first, cheapest thing to try:
# FERRY_EP_DISPATCH_RECV_BLOCKS / FERRY_EP_COMBINE_RECV_BLOCKS (read when the buffer is made, no rebuild), high
# throughput at 24 SMs and low latency, 2 virtual nodes over sm, NCCL off; the default twice (first and last) for
# the run-to-run spread. Then the EP trace of session 15's next_trace.sh if time is left.
# run(kind nvidia-h100-x2, carry [".deps"]): bash docs/results/session16_2xH100/scripts/next_sm_tune.sh 2>&1 | tail -60
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin smtune 560
call_build_dir build-device "ferry-bench ferry_gpu_tests"
# First the GPU suites of the host-only mends made after session 16's last call (EpPath::overlaps_combine
# removed; the direct path's low-latency no-overlap rule moved into init_cross_node; not yet run on a GPU).
T=build-device/tests/ferry_gpu_tests
call_run ep_np2 60 mpirun --allow-run-as-root --bind-to none -np 2 $T --gtest_filter='Ep*'
call_run ep_2x1_sm 60 mpirun --allow-run-as-root --bind-to none -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self $T --gtest_filter='Ep*'
M="mpirun --allow-run-as-root --bind-to none -np 2"; B=build-device/bench/ferry-bench
V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
# tune MODE NAME [KNOB=VALUE]: one run, its expanded rows (us) on one line.
tune() {
  local mode="$1" name="$2" env=()
  [ -n "${3:-}" ] && env=(-x "$3")
  call_run "${mode}_$name" 60 $M $V "${env[@]}" $B ep --layout expanded --no-nccl --mode "$mode" --csv "$CALL_DIR/${mode}_$name.csv"
  python3 - "$CALL_DIR/${mode}_$name.csv" "${mode} ${3:-default}" <<'PY'
import csv, sys
rows = {r["op"]: float(r["ferry_us"]) for r in csv.DictReader(open(sys.argv[1]))}
print("%-44s" % sys.argv[2], "  ".join("%s %.1f" % (k, v) for k, v in sorted(rows.items())))
PY
}
tune ht default
for v in 6 8 16 18; do tune ht d$v FERRY_EP_DISPATCH_RECV_BLOCKS=$v; done
for v in 4 8 16 20; do tune ht c$v FERRY_EP_COMBINE_RECV_BLOCKS=$v; done
tune ht default2
tune ll default
for v in 33 99; do tune ll d$v FERRY_EP_DISPATCH_RECV_BLOCKS=$v; done
for v in 33 99; do tune ll c$v FERRY_EP_COMBINE_RECV_BLOCKS=$v; done
tune ll default2
[ "$(call_left)" -gt 200 ] && bash docs/results/session15_2xH100/scripts/next_trace.sh > $CALL_DIR/trace.txt 2>&1
call_end
