# Session 16, call 5 (nvidia-h100-x2): figures of main after the session's merge (c65971e's library code): issue 23's
# EP table (as session 15's c1, without the AllReduce and probe stages, whose code did not change) and issue 24's
# cross-node table (scripts/device_crossnode.sh, every stage plus tcp zero-copy), DeepEP last if time is left.
# run(kind nvidia-h100-x2, carry [".deps"]): bash docs/results/session16_2xH100/scripts/c5.sh 2>&1 | tail -60
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 560
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $CALL_DIR/cfg.log 2>&1
cmake --build build-device -j30 --target ferry-bench > $CALL_DIR/build.log 2>&1 || grep " error" $CALL_DIR/build.log | head
rm -f $CALL_DIR/cfg.log $CALL_DIR/build.log; echo "built in $(call_elapsed) s"
M="mpirun --allow-run-as-root --bind-to none -np 2"; B=build-device/bench/ferry-bench
call_run ep_table 150 $M $B ep --halves --check --csv $CALL_DIR/ep_2xH100_2ranks.csv
for r in 1 2 3; do call_run ep_ll_$r 40 $M $B ep --mode ll --tokens 1,128,512 --csv $CALL_DIR/ep_ll_$r.csv; done
call_run ep_sms 100 $M $B ep --mode ht --sms 8,24,48 --csv $CALL_DIR/ep_sms_2xH100_2ranks.csv
mkdir -p $CALL_DIR/crossnode
OUT=$CALL_DIR/crossnode FERRY_STAGE_TIMEOUT=100 BUILD_DIR=build-device \
  FERRY_CROSSNODE_STAGES="ar_sm ar_tcp ep_sm ep_tcp ep_cuda_ipc ep_nvlink ar_tcp_zc ep_tcp_zc" \
  timeout 260 scripts/device_crossnode.sh > $CALL_DIR/crossnode.txt 2>&1; echo "crossnode rc=$? ($(call_elapsed) s)"
grep -E "^(sm|tcp|cuda_ipc) " $CALL_DIR/crossnode/crossnode_table.txt
[ -f .deps/DeepEP/setup.py ] && [ "$(call_left)" -gt 200 ] && { OUT=$CALL_DIR/deepep timeout 190 scripts/device_deepep.sh > $CALL_DIR/deepep.log 2>&1; echo "deepep rc=$? ($(call_elapsed) s)"; }
grep -h -E "^(ht|ll) " $CALL_DIR/ep_table.log | head -24
call_end
