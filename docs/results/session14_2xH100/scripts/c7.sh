# Session 14, call 7 (fresh machine): branch exp/channel-layer (the working tree) against main (.ab/main): the GPU
# suites on one node, 2x1 over sm and 2x2, the window tests, and an A/B of the hierarchical AllReduce (the one
# path whose PTX changed by more than a renaming: two parameter loads per kernel) over sm.
# Before, here: rm -rf .ab; mkdir -p .ab/main; git archive main | tar -x -C .ab/main
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session14_2xH100/scripts/c7.sh 2>&1 | tail -40
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c7 280
ln -sfn "$ROOT/.deps" .ab/main/.deps
ferry_device_cmake_args build-device -DFERRY_BUILD_PYTHON=OFF; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $CALL_DIR/cfg.log 2>&1
(cd .ab/main && ferry_device_cmake_args build -DFERRY_BUILD_PYTHON=OFF && cmake "${cmake_args[@]}" > $CALL_DIR/cfg_main.log 2>&1)
cmake --build build-device -j22 --target ferry-bench ferry_gpu_tests ferry_gpu_window_tests > $CALL_DIR/build.log 2>&1 & p1=$!
cmake --build .ab/main/build -j10 --target ferry-bench > $CALL_DIR/build_main.log 2>&1 & p2=$!
for p in $p1 $p2; do wait $p || echo "build $p failed"; done; grep -h " error" $CALL_DIR/build*.log | head
rm -f $CALL_DIR/cfg*.log $CALL_DIR/build*.log; echo "built in $(call_elapsed) s"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests; S="-x FERRY_TEST_SHARE_GPUS=1"
XN="*AllReduce*:Ep*:Timeout.Hier*"
call_run np2 90 $M -np 2 $T
V="$S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1"
call_ab ar_hier_sm_ 2 .ab/main/build/bench/ferry-bench build-device/bench/ferry-bench "$V" allreduce --sizes 256K,1M,16M --dtypes bf16
call_run 2x1_sm 60 $M -np 2 $V $T --gtest_filter="$XN"
call_run 2x2 90 $M -np 4 $S -x FERRY_RANKS_PER_NODE=2 $T --gtest_filter="$XN"
call_run window_np2 30 $M -np 2 build-device/tests/ferry_gpu_window_tests
call_end
