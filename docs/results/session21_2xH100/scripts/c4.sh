# Session 21, call 4 (run(kind nvidia-h100-x2, carry [".deps"])): main after session 21's merges.
# 1. The whole GPU suite at 2 ranks (one per GPU), Ep* as 2x2 on both cross-node paths (hierarchical and direct,
#    the corrected combine tolerance), racecheck of the route tests.
# 2. Own rows first with --route-ahead at 8 / 24 SMs: the 8-SM target (>= 0.8 of the 24-SM bandwidth) with the
#    layout made ahead on both sides.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 500
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
call_build_dir build-device "ferry-bench ferry_gpu_tests"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests; B=build-device/bench/ferry-bench
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 -x UCX_TLS=sm,self"
call_run gpu_np2 150 $M -np 2 $T
call_run ep_2x2_hier 100 $M -np 4 $V $T --gtest_filter='Ep*'
call_run ep_2x2_direct 100 $M -np 4 $V -x FERRY_EP_HIERARCHICAL=0 $T --gtest_filter='Ep*'
call_run racecheck 60 $M -np 2 $SAN --tool racecheck --error-exitcode 86 $T --gtest_filter='Ep.RouteAhead'
call_run own_routed 60 $M -np 2 $B ep --layout rank_rows --mode ht --own-rows-first --route-ahead --sms 8,24 --check \
  --csv $CALL_DIR/own_routed.csv
grep -h -E "^ht |check:" $CALL_DIR/own_routed.log
call_end
