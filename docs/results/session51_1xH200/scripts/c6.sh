# Session 51 c6 on one H200: run(kind nvidia-h200, carry [".deps"]), ~200 s, from a checkout of main. Where c5's
# ~1.5 us a put beyond UCX's own put call goes (ferry-bench net --memory cuda over cuda_ipc, 2 virtual nodes on the
# ONE GPU, ucx_perftest in the same run, which inherits the same environment): c5's setting again; UCX's cuda_ipc
# completions polled 256 at a time instead of 16 (UCX_CUDA_IPC_MAX_POLL: the proxy progresses once per batch of up to
# 64 descriptors, so with 16 its requests are seen complete ms late); the proxy never napping
# (FERRY_PROXY_IDLE_SPINS=0); and 16M a size instead of 256M (at 64K 256 puts, far from the proxy's 4096 in flight).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 ${C6_BUDGET:-230}
call_build_dir build-device ferry-bench
N=$ROOT/build-device/bench/ferry-bench
M=${M:-mpirun --allow-run-as-root --bind-to none}
call_virtual_nodes
ARGS="net --memory cuda --sizes 64K,256K,1M"
for r in 1 2; do
  call_run base_$r 40 $M2 $IPC $N $ARGS --bytes 256M
  call_run poll256_$r 40 $M2 $IPC -x UCX_CUDA_IPC_MAX_POLL=256 $N $ARGS --bytes 256M
done
call_run nonap 40 $M2 $IPC -x FERRY_PROXY_IDLE_SPINS=0 $N $ARGS --bytes 256M
call_run bytes16m 40 $M2 $IPC $N $ARGS --bytes 16M
for f in base_1 poll256_1 base_2 poll256_2 nonap bytes16m; do
  echo "== $f"; grep -E "^cuda" $CALL_DIR/$f.log
done
call_end
