# Session 29 c5: run(kind nvidia-h100-x2, carry [".deps"]) on branch tcp-block-bytes. Across nodes the overlapped
# halves split the SMs half and half "until measured" (ep_buffer.cpp); over cuda_ipc (c3) the HT combine's send half
# alone took 499 us on 24 SMs and its receive half 131, the dispatch's 194 and 443, yet each call ran them on 12
# SMs each. The split of inside a node (dispatch receive 2/3, combine receive 1/4 on 2 ranks) by the knobs
# (FERRY_EP_DISPATCH_RECV_BLOCKS / FERRY_EP_COMBINE_RECV_BLOCKS, which also apply across nodes), one binary:
# A/B over cuda_ipc, sm and tcp; Ep* over cuda_ipc and sm with it; memcheck over cuda_ipc without UCX's API probes.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 520
call_build_dir build-device "ferry-bench ferry_gpu_tests"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests; B=build-device/bench/ferry-bench
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
IPC="$VN -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
SM="$VN -x UCX_TLS=sm,self"; TCP="$VN -x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
w() { printf '#!/usr/bin/env bash\nexport %s\nexec %s "$@"\n' "$2" "$ROOT/$B" > $CALL_DIR/$1; chmod +x $CALL_DIR/$1; }
w base "FERRY_AB_SIDE=base"; w c6 "FERRY_EP_COMBINE_RECV_BLOCKS=6"
w c6d16 "FERRY_EP_COMBINE_RECV_BLOCKS=6 FERRY_EP_DISPATCH_RECV_BLOCKS=16"
w c4d18 "FERRY_EP_COMBINE_RECV_BLOCKS=4 FERRY_EP_DISPATCH_RECV_BLOCKS=18"
call_ab ipc_c6_ 2 $CALL_DIR/base $CALL_DIR/c6 "$IPC" ep --layout expanded --mode ht --no-nccl
call_ab ipc_c6d16_ 2 $CALL_DIR/base $CALL_DIR/c6d16 "$IPC" ep --layout expanded --mode ht --no-nccl
call_ab ipc_c4d18_ 2 $CALL_DIR/base $CALL_DIR/c4d18 "$IPC" ep --layout expanded --mode ht --no-nccl
call_ab sm_c6d16_ 2 $CALL_DIR/base $CALL_DIR/c6d16 "$SM -x NCCL_P2P_DISABLE=1" ep --layout expanded --mode ht
call_run ep_ipc_c6d16 60 $M -np 2 $IPC -x FERRY_EP_COMBINE_RECV_BLOCKS=6 -x FERRY_EP_DISPATCH_RECV_BLOCKS=16 $T \
  --gtest_filter='Ep*'
call_run ep_sm_c6d16 60 $M -np 2 $SM -x FERRY_EP_COMBINE_RECV_BLOCKS=6 -x FERRY_EP_DISPATCH_RECV_BLOCKS=16 $T \
  --gtest_filter='Ep*'
call_run ipc_memcheck 60 $M -np 2 $IPC $SAN --tool memcheck --report-api-errors no --error-exitcode 86 $T \
  --gtest_filter='Ep/EpMatrix.DispatchCombine/*bf16*:Ep.HandleReuse'
call_ab tcp_c6d16_ 1 $CALL_DIR/base $CALL_DIR/c6d16 "$TCP" ep --layout expanded --mode ht
rm -f $CALL_DIR/base $CALL_DIR/c6 $CALL_DIR/c6d16 $CALL_DIR/c4d18
call_end
