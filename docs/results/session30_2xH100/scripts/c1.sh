# Prepared in session 29 for the next session (NOT run). run(kind nvidia-h100-x2, carry [".deps"]) on main, ~420 s.
# (1) The default of NOTE [EP across nodes: halves' split] on GPUs (session 29 ran it only through the knobs, c5):
#     Ep* as 2x1 over cuda_ipc (the inside-a-node split) and over sm (half each), killed peers over cuda_ipc.
# (2) What c5 left open: over sm the dispatch alone with 2/3 receive blocks (c5's 0.987 came with the combine's
#     1/4, which lost there), and over tcp the inside-a-node split in 3 rounds (c5's single round read 0.87-0.89
#     while NCCL moved 1.10 beside it).
# (3) Issue 24's whole table on main (sm, tcp, cuda_ipc against NVLink).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 560
call_build_dir build-device "ferry-bench ferry_gpu_tests ferry_gpu_fault_tests"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests; B=build-device/bench/ferry-bench
F=build-device/tests/ferry_gpu_fault_tests; U="env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY"
VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
IPC="$VN -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
SM="$VN -x UCX_TLS=sm,self"; TCP="$VN -x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
call_run ep_ipc 60 $M -np 2 $IPC $T --gtest_filter='Ep*'
call_run ep_sm 60 $M -np 2 $SM $T --gtest_filter='Ep*'
call_run faults_ipc 60 $U UCX_TLS=sm,cuda_ipc,cuda_copy FERRY_UCX_GPU_MEMORY=on FERRY_UCX_PEER_FAILURE=0 $F \
  --gtest_filter='KilledPeer.AcrossNodes'
mkdir -p $CALL_DIR/crossnode
OUT=$CALL_DIR/crossnode FERRY_STAGE_TIMEOUT=90 BUILD_DIR=build-device \
  FERRY_CROSSNODE_STAGES="ar_sm ar_tcp ep_sm ep_tcp ep_cuda_ipc ep_nvlink" \
  timeout 200 scripts/device_crossnode.sh > $CALL_DIR/crossnode.txt 2>&1
echo "crossnode rc=$? ($(call_elapsed) s)"
grep -E "^(sm|tcp|cuda_ipc) " $CALL_DIR/crossnode/crossnode_table.txt
w() { printf '#!/usr/bin/env bash\nexport %s\nexec %s "$@"\n' "$2" "$ROOT/$B" > $CALL_DIR/$1; chmod +x $CALL_DIR/$1; }
w base "FERRY_AB_SIDE=base"; w d16 "FERRY_EP_DISPATCH_RECV_BLOCKS=16"
w c6d16 "FERRY_EP_COMBINE_RECV_BLOCKS=6 FERRY_EP_DISPATCH_RECV_BLOCKS=16"
call_ab sm_d16_ 2 $CALL_DIR/base $CALL_DIR/d16 "$SM -x NCCL_P2P_DISABLE=1" ep --layout expanded --mode ht
call_ab tcp_c6d16_ 3 $CALL_DIR/base $CALL_DIR/c6d16 "$TCP" ep --layout expanded --mode ht
rm -f $CALL_DIR/base $CALL_DIR/d16 $CALL_DIR/c6d16
call_end
