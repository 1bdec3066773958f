# Prepared in session 13 for the next one (not run): exp/net-pipelined-13 (its head: ranges for high throughput
# only) against main, with every suite a merge needs. Built beside main on the device.
# Before, here: rm -rf .ab/*; mkdir -p .ab/pipe; git archive exp/net-pipelined-13 | tar -x -C .ab/pipe
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session13_2xH100/scripts/next_pipelined.sh 2>&1 | tail -80
# (Do not carry .ab again on a warm machine: it replaces the built tree.) Its stages may not all fit one call:
# the time guard skips the rest with a message; run those in a second call.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin np 570
ln -sfn "$ROOT/.deps" .ab/pipe/.deps
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $CALL_DIR/cfg_main.log 2>&1
(cd .ab/pipe && ferry_device_cmake_args build -DFERRY_BUILD_PYTHON=OFF && cmake "${cmake_args[@]}" > $CALL_DIR/cfg_new.log 2>&1)
cmake --build build-device -j12 --target ferry-bench > $CALL_DIR/build_main.log 2>&1 & p1=$!
cmake --build .ab/pipe/build -j20 --target ferry-bench ferry_gpu_tests ferry_gpu_fault_tests > $CALL_DIR/build_new.log 2>&1 & p2=$!
for p in $p1 $p2; do wait $p || echo "build $p failed"; done; grep -h " error" $CALL_DIR/build_*.log | head
rm -f $CALL_DIR/cfg_*.log $CALL_DIR/build_*.log; echo "built in $(call_elapsed) s"
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/pipe/build/tests/ferry_gpu_tests; F=.ab/pipe/build/tests/ferry_gpu_fault_tests
BASE=build-device/bench/ferry-bench; NEW=.ab/pipe/build/bench/ferry-bench
V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
IPC="$V -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
call_run ipc 60 $M -np 2 $IPC $T --gtest_filter="Ep*"
call_run sm 60 $M -np 2 $V -x UCX_TLS=sm,self $T --gtest_filter="Ep*"
call_run tcp 90 $M -np 2 $V -x UCX_TLS=tcp,self $T --gtest_filter="Ep*"
call_run 2x2_direct 90 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 -x FERRY_EP_HIERARCHICAL=0 $T --gtest_filter="Ep*"
call_run 2x2_hier 90 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 $T --gtest_filter="Ep*"
call_ab ipc_ 2 $BASE $NEW "$IPC" ep --layout expanded --no-nccl
call_ab sm_ 2 $BASE $NEW "$V -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1" ep --layout expanded
U="env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY"
call_run faults 90 $U $F --gtest_filter='KilledPeer.AcrossNodes'
call_run faults_ipc 60 $U UCX_TLS=sm,cuda_ipc,cuda_copy FERRY_UCX_GPU_MEMORY=on FERRY_UCX_PEER_FAILURE=0 $F --gtest_filter='KilledPeer.AcrossNodes'
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
SF="Ep/EpMatrix.DispatchCombine/ht_*_h2048_*:Ep/EpMatrix.DispatchCombine/ll_bf16_h2048_*"  # small cases, both modes
for tool in memcheck racecheck; do call_run san_$tool 90 $M -np 2 $V -x UCX_TLS=sm,self $SAN --tool $tool --error-exitcode 86 $T --gtest_filter="$SF"; done
call_run san_memcheck_ipc 90 $M -np 2 $IPC $SAN --tool memcheck --report-api-errors no --error-exitcode 86 $T --gtest_filter="$SF"
call_ab tcp_ 1 $BASE $NEW "$V -x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1" ep --layout expanded
call_end
