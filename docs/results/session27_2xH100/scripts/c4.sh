# Session 27, call 4 (session 26's c5.sh; run(kind nvidia-h100-x2, carry [".deps"])): the working tree = main e4041d1 (pair layout,
# prefetch up to 48 blocks) + this driver. Its GPU tests (the restricted-SM test alone, Ep* on 2 GPUs, Ep* as 2
# virtual nodes over UCX shared memory), the Python EP tests, then issue 23's figures from one run (NCCL in the same
# processes): high throughput with halves, --check and route ahead; low latency 3 runs; the SM sweep 4..132.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 570
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
call_build_dir build-device "ferry-bench ferry_gpu_tests ferry_python"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests; B=build-device/bench/ferry-bench
call_run restricted_np2 60 $M -np 2 $T --gtest_filter='EpRestrictedSms*'
call_run ep_np2 100 $M -np 2 $T --gtest_filter='Ep*'
call_run ep_2x1_sm 90 $M -np 2 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self $T --gtest_filter='Ep*'
export PYTHONPATH="$PWD/build-device/python${PYTHONPATH:+:$PYTHONPATH}"
call_run py_ep_np2 90 python3 -m torch.distributed.run --standalone --nproc-per-node 2 -m pytest -q \
  -p no:cacheprovider tests/python/test_gpu_ep.py
call_run ep_table 150 $M -np 2 $B ep --mode ht --halves --check --route-ahead --csv $CALL_DIR/ep_ht_2xH100_2ranks.csv
grep -h -E "^(ht|ll) |check:" $CALL_DIR/ep_table.log | head -20
for r in 1 2 3; do
  call_run ep_ll_$r 40 $M -np 2 $B ep --mode ll --tokens 1,128,512 --route-ahead --csv $CALL_DIR/ep_ll_2xH100_2ranks_$r.csv
  grep -h -E "^ll " $CALL_DIR/ep_ll_$r.log | head -12
done
[ "$(call_left)" -gt 90 ] || { echo "no time for the SM sweep"; call_end; exit 0; }
call_run ep_sms 240 $M -np 2 $B ep --mode ht --sms 4,8,16,24,48,132 --route-ahead \
  --csv $CALL_DIR/ep_sms_2xH100_2ranks.csv
grep -h -E "^ht " $CALL_DIR/ep_sms.log | head -60
call_end
