# Session 48 c7 on one H200: run(kind nvidia-h200, carry [".deps"]), ~240 s. CORRECTNESS SCALE ONLY (2 ranks
# share the GPU under MPS, gloo). The working tree (main, with the zero-copy row check in the C++ argument checks) built
# with Python: the CPU tests, then the zero-copy and rank-rows Python GPU tests.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c7 230
call_build_dir build-py "ferry ferry_python"
export PYTHONPATH=$ROOT/build-py/python PYTHONUNBUFFERED=1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
call_run py_cpu 40 python3 -m pytest -q -p no:cacheprovider tests/python/test_cpu_zero_copy_combine.py \
  tests/python/test_cpu_own_rows_first.py
call_run py_gpu_2shared 120 env FERRY_TEST_SHARE_GPUS=1 python3 -m torch.distributed.run --standalone \
  --nproc-per-node 2 -m pytest -q -rs -p no:cacheprovider tests/python/test_gpu_ep_zero_copy_combine.py \
  tests/python/test_gpu_ep_rank_rows.py
tail -5 $CALL_DIR/py_gpu_2shared.log
echo quit | nvidia-cuda-mps-control
call_end
