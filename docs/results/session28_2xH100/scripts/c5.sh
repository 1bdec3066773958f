# Session 28, c5: run(kind nvidia-h100-x2, carry [".deps"]) on exp/held-signals (as merged): issue 24's table.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 400
call_build_dir build-device "ferry-bench"
mkdir -p $CALL_DIR/crossnode
OUT=$CALL_DIR/crossnode FERRY_STAGE_TIMEOUT=90 BUILD_DIR=build-device \
  FERRY_CROSSNODE_STAGES="ar_tcp ep_tcp ar_sm ep_sm" \
  timeout $(( $(call_left) - 10 )) scripts/device_crossnode.sh > $CALL_DIR/crossnode.txt 2>&1
echo "crossnode rc=$? ($(call_elapsed) s)"
grep -E "^(sm|tcp) " $CALL_DIR/crossnode/crossnode_table.txt
call_end
