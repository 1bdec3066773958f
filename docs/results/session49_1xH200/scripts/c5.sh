# Session 49 c5 on one H200: run(kind nvidia-h200, carry [".deps"]), ~330 s. CORRECTNESS SCALE ONLY (2 ranks share
# the GPU under MPS). The working tree of main: (1) ferry-bench pcie-peer with its new own_load_alone row (the ranks
# loading one at a time): on ONE GPU two ranks share its link, so alone should read ~2x what each reads at once;
# the row's first run, its sanity check before 2 GPUs. (2) The rank-rows / zero-copy GPU tests after their graph
# rounds were shared (graph_and_many_tokens; Python graph_replay_failures), C++ on 2 shared ranks, Python under
# torchrun --nproc-per-node 2.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 ${C5_BUDGET:-330}
call_build_dir build-py "ferry ferry_python ferry-bench ferry_gpu_tests"
export PYTHONPATH=$ROOT/build-py/python PYTHONUNBUFFERED=1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
M="mpirun --allow-run-as-root --bind-to none -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
call_run pcie_peer 60 $M -np 2 -x FERRY_TEST_SHARE_GPUS=1 build-py/bench/ferry-bench pcie-peer --sms 8,66 \
  --bytes 16M --item-bytes 1792
grep -hE "^(own|peer)_" $CALL_DIR/pcie_peer.log
call_run rr_2shared 120 $M -np 2 -x FERRY_TEST_SHARE_GPUS=1 build-py/tests/ferry_gpu_tests \
  --gtest_filter="EpZeroCopy*:EpOwnRowsFirst*"
grep -a "FAILED  \]\|Failure\|timed out" $CALL_DIR/rr_2shared.log | head -8
call_run py_gpu_2shared 120 env FERRY_TEST_SHARE_GPUS=1 python3 -m torch.distributed.run --standalone \
  --nproc-per-node 2 -m pytest -q -rs -p no:cacheprovider tests/python/test_gpu_ep_zero_copy_combine.py \
  tests/python/test_gpu_ep_rank_rows.py -k "graph"
tail -4 $CALL_DIR/py_gpu_2shared.log
echo quit | nvidia-cuda-mps-control
call_end
