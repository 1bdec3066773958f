# Session 18, call 6 (nvidia-h100-x2): issue 23's table from one run of the final exp/own-rows-first tree (the rank-rows
# send kernels templated on own rows first: the rank-order ones compile as main's, SASS up to one operand order),
# its tests first. DeepEP is not in this call (device time): its figures stay those of session 17's c4.
# run(kind nvidia-h100-x2, carry [".deps"]): bash docs/results/session18_2xH100/scripts/c6.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 560
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
call_build_dir build-device "ferry-bench ferry_gpu_tests"
M="mpirun --allow-run-as-root --bind-to none -np 2"; B=build-device/bench/ferry-bench; T=build-device/tests/ferry_gpu_tests
call_run own_np2 60 $M $T --gtest_filter='EpOwnRowsFirst.*:*EpRankRows*'
call_run ep_np2 60 $M $T --gtest_filter='Ep*'
call_run ep_table 150 $M $B ep --halves --check --csv $CALL_DIR/ep_2xH100_2ranks.csv
call_run ep_own 60 $M $B ep --layout rank_rows --mode ht --own-rows-first --sms 8,24 --check --csv $CALL_DIR/ep_own_2xH100_2ranks.csv
for r in 1 2 3; do call_run ep_ll_$r 40 $M $B ep --mode ll --tokens 1,128,512 --csv $CALL_DIR/ep_ll_$r.csv; done
call_run ep_sms 150 $M $B ep --mode ht --sms 4,8,16,24,48,132 --csv $CALL_DIR/ep_sms_2xH100_2ranks.csv
call_run ep_own_sms 60 $M $B ep --layout rank_rows --mode ht --own-rows-first --sms 4,8,16,132 --csv $CALL_DIR/ep_own_sms_2xH100_2ranks.csv
grep -h -E "^(ht|ll) |check:" $CALL_DIR/ep_table.log $CALL_DIR/ep_own.log | head -30
call_end
