# Session 45 c6. run(kind nvidia-h200-x2, carry [".deps"]), ~150 s, main (after 7cb4b30: --halves unaligned, events
# recorded external only inside a capture). ferry-bench ep --no-graph (failed before: cudaErrorIllegalState) and
# --check with --aligned inside the node, and over tcp as 2x1 with --halves (each half's time unaligned again).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 230
call_build_dir build-device ferry-bench
M="mpirun --allow-run-as-root --bind-to none -np 2"; VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
E="build-device/bench/ferry-bench ep --layout expanded --iters 20 --warmup 5"
call_run nvl_nograph 40 $M $E --aligned --no-graph --check --csv $CALL_DIR/nvl_nograph.csv
call_run tcp_halves 60 $M $VN -x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1 $E --aligned --halves \
  --check --csv $CALL_DIR/tcp_halves.csv
for f in $CALL_DIR/*.log; do echo "== $(basename $f .log)"; grep -a "^ht\|^ll\|halves\|rror\|check" $f | cut -c1-140; done
call_end
