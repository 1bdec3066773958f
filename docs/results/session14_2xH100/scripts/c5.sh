# Session 14, call 5 (warm after call 4, main built there): issue 24's table (scripts/device_crossnode.sh).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 400
mkdir -p $CALL_DIR/crossnode
OUT=$CALL_DIR/crossnode FERRY_STAGE_TIMEOUT=100 timeout 300 scripts/device_crossnode.sh > $CALL_DIR/crossnode.txt 2>&1; echo "crossnode rc=$? ($(call_elapsed) s)"
grep -E "^(sm|tcp|cuda_ipc) " $CALL_DIR/crossnode/crossnode_table.txt
call_end
