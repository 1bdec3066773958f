# Prepared in session 18 for the next one (not run; the device time ran out): what session 18's tables lack.
#   1) DeepEP 567632d beside issue 23's table (docs/results/ep_2xH100.txt quotes session 17's DeepEP figures);
#   2) issue 24's table (docs/results/crossnode_2xH100.txt is session 16's; sessions 17-18 changed the cross-node
#      receive halves' range code, 3a36de3, A/B'd, and nothing else across nodes);
#   3) own rows first at 9-12 SMs, where the copy engine's rule (at most 8 send blocks) was not measured.
# run(kind nvidia-h100-x2, carry [".deps"]): bash docs/results/session18_2xH100/scripts/next_regen.sh 2>&1 | tail -60
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next 575
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
call_build_dir build-device "ferry-bench"
M="mpirun --allow-run-as-root --bind-to none -np 2"; B=build-device/bench/ferry-bench
E="ep --layout rank_rows --mode ht --own-rows-first --no-nccl"
for pc in 0 100; do
  call_run own_p$pc 60 $M -x FERRY_EP_OWN_ROWS_COPY_PERCENT=$pc $B $E --sms 9,10,11,12
  grep -h -E "^ht .*dispatch" $CALL_DIR/own_p$pc.log
done
mkdir -p $CALL_DIR/crossnode
OUT=$CALL_DIR/crossnode FERRY_STAGE_TIMEOUT=100 BUILD_DIR=build-device \
  FERRY_CROSSNODE_STAGES="ar_sm ar_tcp ep_sm ep_tcp ep_cuda_ipc ep_nvlink ar_tcp_zc ep_tcp_zc" \
  timeout 240 scripts/device_crossnode.sh > $CALL_DIR/crossnode.txt 2>&1; echo "crossnode rc=$? ($(call_elapsed) s)"
grep -E "^(sm|tcp|cuda_ipc) " $CALL_DIR/crossnode/crossnode_table.txt
[ -f .deps/DeepEP/setup.py ] && [ "$(call_left)" -gt 170 ] && { OUT=$CALL_DIR/deepep timeout 190 scripts/device_deepep.sh > $CALL_DIR/deepep.log 2>&1; echo "deepep rc=$? ($(call_elapsed) s)"; }
call_end
