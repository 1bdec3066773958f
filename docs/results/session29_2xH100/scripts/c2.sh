# Session 29 c2 (branch exp/ar-proxy-pieces, pieces off = main's kernel path): c1 found 8 pieces slower and the
# ep_based fence / 256 KiB blocks faster on top of them; measure those two against main's configuration.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 590
call_build_dir build-device "ferry-bench ferry_gpu_tests"
B=build-device/bench/ferry-bench
VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
w() { printf '#!/usr/bin/env bash\nexport FERRY_HIERARCHICAL_PROXY_PIECES=1 %s\nexec %s "$@"\n' "$2" "$ROOT/$B" \
  > $CALL_DIR/$1; chmod +x $CALL_DIR/$1; }
w base ""; w fence "UCX_FENCE_MODE=ep_based"; w bb "FERRY_HIERARCHICAL_BLOCK_BYTES=262144"
w both "UCX_FENCE_MODE=ep_based FERRY_HIERARCHICAL_BLOCK_BYTES=262144"
TCP="$VN -x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
SMS="$VN -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1"
ARGS="allreduce --sizes 256K,1M,4M,16M,64M --dtypes bf16 --algos hierarchical"
call_ab fence_ 3 $CALL_DIR/base $CALL_DIR/fence "$TCP" $ARGS
call_ab bb_ 3 $CALL_DIR/base $CALL_DIR/bb "$TCP" $ARGS
call_ab both_ 3 $CALL_DIR/base $CALL_DIR/both "$TCP" $ARGS
call_ab smboth_ 2 $CALL_DIR/base $CALL_DIR/both "$SMS" $ARGS
EPA="ep --layout expanded"
call_ab epfence_ 2 $CALL_DIR/base $CALL_DIR/fence "$TCP" $EPA
rm -f $CALL_DIR/base $CALL_DIR/fence $CALL_DIR/bb $CALL_DIR/both
call_end
