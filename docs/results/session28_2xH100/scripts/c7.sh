# Session 28, c7 (run as one command line, warm machine after c6; kind nvidia-h100-x2, carry [".deps"]) on
# exp/held-signals bd29ef3: the AllReduce suites over tcp and issue 24's ar_tcp row with FERRY_HIERARCHICAL_BLOCKS=4.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FERRY_HIERARCHICAL_BLOCKS=4
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c7 250; call_build_dir build-device "ferry-bench ferry_gpu_tests"; M="mpirun --allow-run-as-root --bind-to none"
call_run ar_2x1_tcp_b4 60 $M -np 2 -x FERRY_HIERARCHICAL_BLOCKS -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 \
  -x UCX_TLS=tcp,self build-device/tests/ferry_gpu_tests --gtest_filter='*AllReduce*'
call_run ar_2x2_tcp_b4 60 $M -np 4 -x FERRY_HIERARCHICAL_BLOCKS -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 \
  -x UCX_TLS=tcp,self build-device/tests/ferry_gpu_tests --gtest_filter='*AllReduce*'
mkdir -p $CALL_DIR/crossnode
OUT=$CALL_DIR/crossnode FERRY_STAGE_TIMEOUT=60 BUILD_DIR=build-device FERRY_CROSSNODE_STAGES="ar_tcp" timeout 100 \
  scripts/device_crossnode.sh > $CALL_DIR/crossnode.txt 2>&1
grep -E "^tcp " $CALL_DIR/crossnode/crossnode_table.txt; grep -A8 "^dtype" $CALL_DIR/crossnode/ar_tcp.txt; call_end
