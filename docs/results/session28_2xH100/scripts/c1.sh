# Session 28, c1 (session 27's next_crossnode_tcp.sh plus the 2-rank Ep* on main). run(kind nvidia-h100-x2, carry [".deps"]), ~450 s, on main.
# Issue 24: tcp's new default (FERRY_UCX_PEER_FAILURE=auto: tcp-only endpoints connect again without UCX's
# peer-failure handling, zero-copy puts; NOTE [tcp without UCX's peer-failure handling], src/net/ucx_config.cpp)
# on the GPUs for the first time: the cross-node suites over tcp as 2x1 (one GPU per virtual node) and 2x2, killed
# peers over tcp with the default and with 1, then issue 24's table with the _pf stages (the mode kept) beside the
# default tcp rows, NCCL's sockets in the same processes.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 580
call_build_dir build-device "ferry-bench ferry_gpu_tests"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests
TCP="-x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=tcp,self"
# main's 2-rank one-role combine kernel of 61edc41 in a 2-rank test for the first time
call_run ep_np2 120 $M -np 2 $T --gtest_filter='Ep*'
call_run ep_ar_2x1_tcp 120 $M -np 2 $TCP $T --gtest_filter='Ep*:*AllReduce*:Timeout.Hier*'
call_run ep_2x2_tcp 120 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 -x UCX_TLS=tcp,self $T \
  --gtest_filter='Ep*:*AllReduce*'
call_run killed_tcp 90 $M -np 2 $TCP $T --gtest_filter='KilledPeer.AcrossNodes'
call_run killed_tcp_pf 90 $M -np 2 $TCP -x FERRY_UCX_PEER_FAILURE=1 $T --gtest_filter='KilledPeer.AcrossNodes'
mkdir -p $CALL_DIR/crossnode
OUT=$CALL_DIR/crossnode FERRY_STAGE_TIMEOUT=90 BUILD_DIR=build-device \
  FERRY_CROSSNODE_STAGES="ar_tcp ep_tcp ar_tcp_pf ep_tcp_pf ar_sm ep_sm" \
  timeout $(( $(call_left) - 10 )) scripts/device_crossnode.sh > $CALL_DIR/crossnode.txt 2>&1
echo "crossnode rc=$? ($(call_elapsed) s)"
grep -E "^(sm|tcp|tcp_pf) " $CALL_DIR/crossnode/crossnode_table.txt
call_end
