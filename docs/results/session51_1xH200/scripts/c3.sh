# Session 51 c3 on one H200: run(kind nvidia-h200, carry [".deps"]), ~450 s, from a checkout of main. The Python
# layer of the final main on the one GPU: the CPU tests, the whole Python GPU suite on 2 ranks sharing the GPU
# under MPS (FERRY_TEST_SHARE_GPUS=1: gloo), ferry.init() from MPI, the MoE example in both modes, and the Python GPU
# tests across 2 virtual nodes (as device_run.sh's python_nodes). CORRECTNESS ONLY.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 ${C3_BUDGET:-450}
call_build_dir build-py "ferry ferry_python ferry_nccl"
export PYTHONPATH=$ROOT/build-py/python PYTHONUNBUFFERED=1
TR="python3 -m torch.distributed.run --standalone"
call_run py_cpu 60 python3 -m pytest -q -p no:cacheprovider tests/python/test_cpu_validation.py \
  tests/python/test_cpu_allreduce_args.py tests/python/test_cpu_own_rows_first.py \
  tests/python/test_cpu_zero_copy_combine.py
call_mps_start 2
call_run py_np2 200 env FERRY_TEST_SHARE_GPUS=1 $TR --nproc-per-node 2 -m pytest -q -rs -p no:cacheprovider tests/python
call_run py_mpi 60 $M -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x PYTHONPATH -x PYTHONUNBUFFERED python3 -m pytest -q -rs \
  -p no:cacheprovider tests/python/test_mpi_init.py
for mode in high_throughput low_latency; do
  call_run example_$mode 60 env FERRY_TEST_SHARE_GPUS=1 $TR --nproc-per-node 2 examples/moe_layer.py --mode $mode
done
call_run py_nodes 150 env FERRY_TEST_SHARE_GPUS=1 FERRY_RANKS_PER_NODE=1 CUDA_MODULE_LOADING=EAGER $TR \
  --nproc-per-node 2 -m pytest -q -rs -p no:cacheprovider tests/python
call_mps_stop
for f in $CALL_DIR/*.log; do echo "== $(basename $f)"; tail -3 $f; done
call_end
