# Session 18, call 7 (nvidia-h100-x2): the Python layer's own_rows_first on GPUs (the rank-rows Python tests,
# parametrized on the order; never run on a GPU before), the final tree of exp/own-rows-first.
# run(kind nvidia-h100-x2, carry [".deps"]): bash docs/results/session18_2xH100/scripts/c7.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c7 330
call_build_dir build-device "ferry_python"
export PYTHONPATH="$PWD/build-device/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
call_run py_cpu 60 python3 -m pytest -q -p no:cacheprovider tests/python/test_cpu_validation.py
call_run py_rank_rows_np2 200 python3 -m torch.distributed.run --standalone --nproc-per-node 2 -m pytest -q \
  -p no:cacheprovider tests/python/test_gpu_ep_rank_rows.py
grep -h -E "passed|failed|error" $CALL_DIR/py_*.log | tail -6
call_end
