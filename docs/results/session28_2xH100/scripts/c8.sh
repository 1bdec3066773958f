# Session 28, c8: run(kind nvidia-h100-x2, carry [".deps"]) on main 4e290b8 (held signals, 4 hierarchical blocks
# over tcp alone): issue 24's table (crossnode_2xH100.txt), then the AllReduce suites over tcp as 2x1 and 2x2.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c8 230
call_build_dir build-device "ferry-bench ferry_gpu_tests"
mkdir -p $CALL_DIR/crossnode
OUT=$CALL_DIR/crossnode FERRY_STAGE_TIMEOUT=70 BUILD_DIR=build-device FERRY_CROSSNODE_STAGES="ar_tcp ep_tcp ar_sm ep_sm" \
  timeout $(( $(call_left) - 40 )) scripts/device_crossnode.sh > $CALL_DIR/crossnode.txt 2>&1
echo "crossnode rc=$? ($(call_elapsed) s)"
grep -E "^(sm|tcp) " $CALL_DIR/crossnode/crossnode_table.txt
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests
call_run ar_2x1_tcp 30 $M -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=tcp,self $T \
  --gtest_filter='*AllReduce*'
call_run ar_2x2_tcp 30 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 -x UCX_TLS=tcp,self $T \
  --gtest_filter='*AllReduce*'
call_end
