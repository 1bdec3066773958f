# Session 21, call 2 (run(kind nvidia-h100-x2, carry [".deps"])): the working tree = branch exp/route-ahead:
# EpBuffer::route / EpLayer.route (host only: the layout kernels a dispatch already runs, launched alone ahead of
# it; the dispatch reuses the handle), and the combine tolerance that counts bf16 roundings (test only; c1's 2x2
# hierarchical run rejected a correct sum).
# 1. GPU tests: the new C++ and Python tests at 2 ranks (one per GPU), 2 virtual nodes over UCX shared memory,
#    the whole Ep* suite as 2x2 (4 ranks on 2 GPUs, the hierarchical path for high throughput), memcheck.
# 2. Issue 23's table from one run: ferry-bench ep --halves --check --route-ahead (NCCL in the same processes).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 580
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
call_build_dir build-device "ferry-bench ferry_gpu_tests ferry_python"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests; B=build-device/bench/ferry-bench
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
R='Ep.RouteAhead:Ep.RouteReplacesTheLayout:EpRankRowsCases.RouteAhead:Ep.HandleReuse:Ep.StaleHandleIsRejected'
call_run route_np2 90 $M -np 2 $T --gtest_filter="$R"
call_run route_2x1_sm 60 $M -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self $T \
  --gtest_filter='Ep.RouteAhead:Ep.RouteReplacesTheLayout'
call_run ep_2x2 100 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 -x UCX_TLS=sm,self $T --gtest_filter='Ep*'
export PYTHONPATH="$PWD/build-device/python${PYTHONPATH:+:$PYTHONPATH}"
call_run py_route_np2 90 python3 -m torch.distributed.run --standalone --nproc-per-node 2 -m pytest -q \
  -p no:cacheprovider tests/python/test_gpu_ep.py -k "route_ahead or reuse"
call_run memcheck 70 $M -np 2 $SAN --tool memcheck --error-exitcode 86 $T \
  --gtest_filter='Ep.RouteAhead:EpRankRowsCases.RouteAhead'
call_run ep_table 180 $M -np 2 $B ep --halves --check --route-ahead --csv $CALL_DIR/ep_2xH100_2ranks.csv
grep -h -E "^(ht|ll) |check:|route ahead" $CALL_DIR/ep_table.log | head -40
call_end
