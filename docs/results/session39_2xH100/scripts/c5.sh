# Session 39 c5 (final main, tests only). run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~200 s.
#   new = main (exp/combine-chunk and exp/bf16-dispatch-chunk merged; its src, tests and include are
#   exp/bf16-dispatch-chunk 3219293's, which c4 measured). Trees: scripts/ab_trees.sh new=main
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 220
call_build_trees ferry_gpu_tests new
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/new/build/tests/ferry_gpu_tests
call_run ep_tests 100 $M -np 2 $T --gtest_filter='Ep*'
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/ep_tests.log | head -12
call_run ep_2x1 80 $M -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 $T --gtest_filter='Ep*'
call_end
