# Prepared in session 18 (branch exp/source-rows; compiled and CPU-tested only): DispatchResult::source_rows (device
# int32 [world], rows from each source rank; the rank-rows receive half already writes it as recv_token_count) and
# EpLayout.source_rows in Python, so own-rows-first callers slice a source's rows without knowing the order. The checked
# rank-rows round (tests/gpu/ep_rank_rows_round.cpp) and the Python reference now check it. Run on the branch's tree:
# run(kind nvidia-h100-x2, carry [".deps"]): bash docs/results/session18_2xH100/scripts/next_source_rows.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin source_rows 300
call_build_dir build-device "ferry_gpu_tests ferry_python"
M="mpirun --allow-run-as-root --bind-to none -np 2"; T=build-device/tests/ferry_gpu_tests
call_run rr_np2 90 $M $T --gtest_filter='EpOwnRowsFirst.*:*EpRankRows*'
export PYTHONPATH="$PWD/build-device/python${PYTHONPATH:+:$PYTHONPATH}"
call_run py_rr_np2 120 python3 -m torch.distributed.run --standalone --nproc-per-node 2 -m pytest -q \
  -p no:cacheprovider tests/python/test_gpu_ep_rank_rows.py
call_end
