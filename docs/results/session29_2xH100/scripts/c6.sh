# Session 29 c6: run(kind nvidia-h100-x2, carry [".deps", "build/libferry.so.0.1.0", "build/tests/ferry_gpu_tests"])
# on branch tcp-block-bytes 1c3dd89 (the halves' split across nodes by where the network writes), built HERE for
# sm_90 (too little device time left for a build there): Ep* as 2x1 over cuda_ipc (the new split by default)
# and over sm (half each, now set by split_halves_evenly).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/c6; ln -sf libferry.so.0.1.0 build/libferry.so.0
export LD_LIBRARY_PATH=$PWD/build:$PWD/.deps/ucx/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
M="mpirun --allow-run-as-root --bind-to none -np 2 -x LD_LIBRARY_PATH -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
timeout 70 $M -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0 \
  build/tests/ferry_gpu_tests --gtest_filter='Ep*' > $OUT/c6/ep_ipc.log 2>&1; echo "ep_ipc rc=$?"
grep -h "PASSED\|FAILED\|SKIPPED" $OUT/c6/ep_ipc.log | sort | uniq -c | head -5
timeout 60 $M -x UCX_TLS=sm,self build/tests/ferry_gpu_tests --gtest_filter='Ep*' > $OUT/c6/ep_sm.log 2>&1
echo "ep_sm rc=$?"; grep -h "PASSED\|FAILED\|SKIPPED" $OUT/c6/ep_sm.log | sort | uniq -c | head -5
