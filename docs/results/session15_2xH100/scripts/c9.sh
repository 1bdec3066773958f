# Session 15, call 9: main as submitted (exp/layout-code-size not merged; its two new tests kept: Ep.TopkAboveEight
# and the top-k 12 variants of Ep.BadExpertIdOnOneRank, here on main's layout): the full GPU suite on 2 GPUs and the
# layout tests on 4 ranks sharing them.
# run(kind nvidia-h100-x2, carry [".deps"]): bash docs/results/session15_2xH100/scripts/c9.sh 2>&1 | tail -30
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c9 200
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $CALL_DIR/cfg.log 2>&1
cmake --build build-device -j30 --target ferry_gpu_tests > $CALL_DIR/build.log 2>&1 || grep " error" $CALL_DIR/build.log | head
rm -f $CALL_DIR/cfg.log $CALL_DIR/build.log; echo "built in $(call_elapsed) s"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests
call_run np2 100 $M -np 2 $T
LT='Ep.TopkAboveEight:Ep.BadExpertIdOnOneRank:Ep.BadExpertIdsAcrossLayoutBlocks:Ep.FusedAndSeparateLayoutAgree'
call_run layout_np4 60 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter="$LT"
grep -aE "FAILED|OK \] Ep.Topk|OK \] Ep.BadExpertIdOnOne" $CALL_DIR/np2.log | head
call_end
