# Session 29 c4: run(kind nvidia-h100-x2, carry [".deps"]) on branch exp/net-combine-rows (tcp-block-bytes + the
# cross-node direct combine's send with rows in flight or the L2 prefetch, FERRY_EP_NET_COMBINE_ROWS 0 / 1 / 2,
# 1 on the branch). c3: over cuda_ipc the HT combine took 973 us against 395 over NVLink (0.41, issue 24's >= 0.5),
# its send half alone 499 us for ~300 MB of HBM traffic, one row at a time. Suites with 1 (sm, cuda_ipc) and 2 (sm),
# racecheck, then one binary, the knob by wrapper: 0 against 1 and 0 against 2 over cuda_ipc and sm.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 480
call_build_dir build-device "ferry-bench ferry_gpu_tests"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests; B=build-device/bench/ferry-bench
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
IPC="$VN -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
SM="$VN -x UCX_TLS=sm,self"
call_run ep_sm_1 60 $M -np 2 $SM $T --gtest_filter='Ep*'
call_run ep_ipc_1 60 $M -np 2 $IPC $T --gtest_filter='Ep*'
call_run ep_sm_2 60 $M -np 2 $SM -x FERRY_EP_NET_COMBINE_ROWS=2 $T --gtest_filter='Ep*'
call_run racecheck_sm_1 60 $M -np 2 $SM $SAN --tool racecheck --error-exitcode 86 $T \
  --gtest_filter='Ep/EpMatrix.DispatchCombine/*bf16*:Ep.HandleReuse'
for v in 0 1 2; do
  printf '#!/usr/bin/env bash\nexport FERRY_EP_NET_COMBINE_ROWS=%s\nexec %s "$@"\n' $v "$ROOT/$B" > $CALL_DIR/r$v
  chmod +x $CALL_DIR/r$v
done
call_ab ipc1_ 2 $CALL_DIR/r0 $CALL_DIR/r1 "$IPC" ep --layout expanded --no-nccl
call_ab ipc2_ 2 $CALL_DIR/r0 $CALL_DIR/r2 "$IPC" ep --layout expanded --no-nccl
call_ab sm1_ 2 $CALL_DIR/r0 $CALL_DIR/r1 "$SM -x NCCL_P2P_DISABLE=1" ep --layout expanded
call_ab sm2_ 2 $CALL_DIR/r0 $CALL_DIR/r2 "$SM -x NCCL_P2P_DISABLE=1" ep --layout expanded
rm -f $CALL_DIR/r0 $CALL_DIR/r1 $CALL_DIR/r2
call_end
