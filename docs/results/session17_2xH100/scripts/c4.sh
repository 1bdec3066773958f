# Session 17, call 4 (nvidia-h100-x2): issue 23's EP figures from one run of main 3a36de3 (the intranode kernels are
# session 16's c65971e's; 3a36de3 changed only the cross-node receive halves, tested in c3): the table with --halves
# and --check, three low-latency runs, the SM sweep the issue names (4, 8, 16, 24, 48, 132), DeepEP 567632d.
# run(kind nvidia-h100-x2, carry [".deps"]): bash docs/results/session17_2xH100/scripts/c4.sh 2>&1 | tail -60
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 570
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $CALL_DIR/cfg.log 2>&1
cmake --build build-device -j30 --target ferry-bench > $CALL_DIR/build.log 2>&1 || grep " error" $CALL_DIR/build.log | head
rm -f $CALL_DIR/cfg.log $CALL_DIR/build.log; echo "built in $(call_elapsed) s"
M="mpirun --allow-run-as-root --bind-to none -np 2"; B=build-device/bench/ferry-bench
call_run ep_table 150 $M $B ep --halves --check --csv $CALL_DIR/ep_2xH100_2ranks.csv
for r in 1 2 3; do call_run ep_ll_$r 40 $M $B ep --mode ll --tokens 1,128,512 --csv $CALL_DIR/ep_ll_$r.csv; done
call_run ep_sms 150 $M $B ep --mode ht --sms 4,8,16,24,48,132 --csv $CALL_DIR/ep_sms_2xH100_2ranks.csv
[ -f .deps/DeepEP/setup.py ] && [ "$(call_left)" -gt 170 ] && { OUT=$CALL_DIR/deepep timeout 190 scripts/device_deepep.sh > $CALL_DIR/deepep.log 2>&1; echo "deepep rc=$? ($(call_elapsed) s)"; }
grep -h -E "^(ht|ll) " $CALL_DIR/ep_table.log | head -24
grep -h -E "^ht " $CALL_DIR/ep_sms.log | head -40
call_end
