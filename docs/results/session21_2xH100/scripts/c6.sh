# Session 21, call 6 (run(kind nvidia-h100-x2, carry [".deps"])): main's Python GPU tests at 2 ranks after the
# combine tolerance change in tests/python/_ep_reference.py (fp8 quantized: 3 x 2^-8 + 2^-10 of S, was 2^-6;
# bf16: 2 x 2^-8 + 2^-10, was 2^-7), which only the route and reuse tests had run under (c2).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 250
call_build_dir build-device "ferry_python"
export PYTHONPATH="$PWD/build-device/python${PYTHONPATH:+:$PYTHONPATH}"
call_run py_ep_np2 140 python3 -m torch.distributed.run --standalone --nproc-per-node 2 -m pytest -q \
  -p no:cacheprovider tests/python/test_gpu_ep.py tests/python/test_gpu_ep_rank_rows.py tests/python/test_gpu_moe_example.py
tail -4 $CALL_DIR/py_ep_np2.log
call_end
