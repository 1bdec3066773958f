# Session 21, call 3 (run(kind nvidia-h100-x2, carry [".deps"])): main after merging exp/route-ahead (c2's tree
# plus result files): the rest of issue 23's figures. DeepEP 567632d built and run here (its own tests and
# harness, FACTS.md's recipe), the low-latency rows three times, the SM sweep the issue names, each with
# --route-ahead (the dispatch reusing a layout EpBuffer::route made ahead, beside the plain one).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 570
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
call_build_dir build-device "ferry-bench"
M="mpirun --allow-run-as-root --bind-to none -np 2"; B=build-device/bench/ferry-bench
for r in 1 2 3; do call_run ep_ll_$r 45 $M $B ep --mode ll --tokens 1,128,512 --route-ahead --csv $CALL_DIR/ep_ll_$r.csv; done
call_run ep_sms 170 $M $B ep --mode ht --sms 4,8,16,24,48,132 --route-ahead --csv $CALL_DIR/ep_sms_2xH100_2ranks.csv
[ -f .deps/DeepEP/setup.py ] && [ "$(call_left)" -gt 150 ] && { OUT=$CALL_DIR/deepep FERRY_DEEPEP_TIMEOUT=150 timeout $(( $(call_left) - 10 )) scripts/device_deepep.sh > $CALL_DIR/deepep.log 2>&1; echo "deepep rc=$? ($(call_elapsed) s)"; }
tail -30 $CALL_DIR/deepep.log
grep -h -E "^ll " $CALL_DIR/ep_ll_*.log | head -30
grep -h -E "^ht " $CALL_DIR/ep_sms.log | head -60
call_end
