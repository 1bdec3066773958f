# Session 29 c1 (branch exp/ar-proxy-pieces rebased on main d5eeae4): session 28's prepared driver.
# branch exp/ar-proxy-pieces (git checkout exp/ar-proxy-pieces first; this script is on main; rebase the branch if
# main moved). Issue 24, the AllReduce over tcp at 16-64 MB (0.72-0.81x NCCL's sockets in session 28's c8): NOTE
# [Hierarchical AllReduce in pieces through the proxy] (src/allreduce/hierarchical.cu): where the proxy moves the
# data, a block's chunk of 1 MiB+ goes as up to FERRY_HIERARCHICAL_PROXY_PIECES puts (8 on the branch), the first
# half of the block copying and pushing while the second half waits for and reduces the pieces that landed.
# The suites with it (2x1 and 2x2 over tcp, 2x1 over shared memory staged by the proxy and mapped), racecheck and
# memcheck on the new test (last), and one binary, the knobs by wrapper: A/B 1 against 8 and 1 against 4 pieces,
# UCX_FENCE_MODE=ep_based against UCX's default fence, one block per 256 KiB of a shard against 64 KiB.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_ar_proxy_pieces 590
call_build_dir build-device "ferry-bench ferry_gpu_tests"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests; B=build-device/bench/ferry-bench
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
call_run ar_2x1_tcp 90 $M -np 2 $VN -x UCX_TLS=tcp,self $T --gtest_filter='*AllReduce*'
call_run ar_2x2_tcp 90 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 -x UCX_TLS=tcp,self $T \
  --gtest_filter='*AllReduce*'
call_run ar_2x1_sm_staged 90 $M -np 2 $VN -x UCX_TLS=sm,self -x FERRY_UCX_SHM_DIRECT=0 $T --gtest_filter='*AllReduce*'
call_run ar_2x1_sm 90 $M -np 2 $VN -x UCX_TLS=sm,self $T --gtest_filter='*AllReduce*'
for v in 1 4 8; do
  printf '#!/usr/bin/env bash\nexport FERRY_HIERARCHICAL_PROXY_PIECES=%s\nexec %s "$@"\n' $v "$ROOT/$B" > $CALL_DIR/p$v
  chmod +x $CALL_DIR/p$v
done
TCP="$VN -x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
SMS="$VN -x UCX_TLS=sm,self -x FERRY_UCX_SHM_DIRECT=0 -x NCCL_P2P_DISABLE=1"
ARGS="allreduce --sizes 1M,4M,16M,64M --dtypes bf16 --algos hierarchical"
call_ab tcp8_ 3 $CALL_DIR/p1 $CALL_DIR/p8 "$TCP" $ARGS
call_ab tcp4_ 2 $CALL_DIR/p1 $CALL_DIR/p4 "$TCP" $ARGS
call_ab sm8_ 2 $CALL_DIR/p1 $CALL_DIR/p8 "$SMS" $ARGS
# UCX's endpoint-based fence against its default "strong" fence (a worker flush that waits for the targets, NOTE
# [Signals after the batch's puts]), on the branch's default, over tcp. Read in UCX's source (ucp_ep_rma_handle_fence,
# src/ucp/rma/rma.inl): with ep_based the next operation on an endpoint fences lazily, with the transport's own
# ordering fence where the endpoint's unflushed operations and the new one use one lane (tcp), else a flush of
# that endpoint only. If it wins, ferry could set it where UCX_FENCE_MODE is unset (ucx_config.cpp).
printf '#!/usr/bin/env bash\nexport UCX_FENCE_MODE=ep_based\nexec %s "$@"\n' "$ROOT/$B" > $CALL_DIR/ep_fence
chmod +x $CALL_DIR/ep_fence
call_ab fence_ 2 $CALL_DIR/p8 $CALL_DIR/ep_fence "$TCP" $ARGS
# Mid-size calls over tcp: one block per 256 KiB of a shard against the built-in 64 KiB
# (FERRY_HIERARCHICAL_BLOCK_BYTES; at 256K both configurations of session 28's c6 ran 4 blocks, so its 0.89 there
# was tcp's noise).
printf '#!/usr/bin/env bash\nexport FERRY_HIERARCHICAL_BLOCK_BYTES=262144\nexec %s "$@"\n' "$ROOT/$B" > $CALL_DIR/bb256k
chmod +x $CALL_DIR/bb256k
call_ab bb_ 3 $CALL_DIR/p8 $CALL_DIR/bb256k "$TCP" allreduce --sizes 256K,512K,1M,2M,4M --dtypes bf16 \
  --algos hierarchical
rm -f $CALL_DIR/p1 $CALL_DIR/p4 $CALL_DIR/p8 $CALL_DIR/ep_fence $CALL_DIR/bb256k
# Last, in whatever time is left: the sanitizers on the new test (staged shared memory: the proxy path).
for tool in racecheck memcheck; do
  call_run ${tool} 90 $M -np 2 $VN -x UCX_TLS=sm,self -x FERRY_UCX_SHM_DIRECT=0 $SAN --tool $tool \
    --error-exitcode 86 $T --gtest_filter='AllReduce.HierarchicalLargeCallsInPieces'
done
call_end
