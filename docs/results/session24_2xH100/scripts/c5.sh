# Session 24, call 5 (run(kind nvidia-h100-x2, carry [".deps"])): the working tree = branch exp/one-role2, main
# 95c3f8a + the one-role combine (ee4b67a's commits) + its kernels loaded when the EpBuffer is built (b606a77):
# what merges into main. Its GPU tests (the restricted-SM test alone first: the lazy-load hang of c1), the Python
# EP tests, then issue 23's high-throughput figures from one run (NCCL in the same processes).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 560
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
call_build_dir build-device "ferry-bench ferry_gpu_tests ferry_python"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests; B=build-device/bench/ferry-bench
call_run restricted_np2 60 $M -np 2 $T --gtest_filter='EpRestrictedSms*'
call_run ep_np2 100 $M -np 2 $T --gtest_filter='Ep*'
export PYTHONPATH="$PWD/build-device/python${PYTHONPATH:+:$PYTHONPATH}"
call_run py_ep_np2 90 python3 -m torch.distributed.run --standalone --nproc-per-node 2 -m pytest -q \
  -p no:cacheprovider tests/python/test_gpu_ep.py
call_run ep_table 180 $M -np 2 $B ep --mode ht --halves --check --route-ahead --csv $CALL_DIR/ep_ht_2xH100_2ranks.csv
grep -h -E "^(ht|ll) |check:|route ahead" $CALL_DIR/ep_table.log | head -40
call_run ep_sms 170 $M -np 2 $B ep --mode ht --sms 4,8,16,24,48,132 --route-ahead \
  --csv $CALL_DIR/ep_sms_2xH100_2ranks.csv
grep -h -E "^ht " $CALL_DIR/ep_sms.log | head -60
call_end
