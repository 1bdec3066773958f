# Session 14, call 2 (nvidia-h100-x2). Three trees: main (build-device, ferry-bench: the A/B base of call 2),
# exp/net-pipelined-13 (.ab/pipe, built in call 1 if the machine is still warm): A/Bs vs main, killed peers, sanitizers.
# run(kind nvidia-h100-x2; carry [".deps",".ab"] only if the machine went cold): bash docs/results/session14_2xH100/scripts/c2.sh 2>&1 | tail -70
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 560
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
ln -sfn "$ROOT/.deps" .ab/pipe/.deps
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $CALL_DIR/cfg_main.log 2>&1
(cd .ab/pipe && ferry_device_cmake_args build -DFERRY_BUILD_PYTHON=OFF && cmake "${cmake_args[@]}" > $CALL_DIR/cfg_pipe.log 2>&1)
cmake --build build-device -j12 --target ferry-bench > $CALL_DIR/build_main.log 2>&1 & p1=$!
cmake --build .ab/pipe/build -j20 --target ferry-bench ferry_gpu_tests ferry_gpu_fault_tests > $CALL_DIR/build_pipe.log 2>&1 & p2=$!
for p in $p1 $p2; do wait $p || echo "build $p failed"; done; grep -h " error" $CALL_DIR/build_*.log | head
rm -f $CALL_DIR/cfg_*.log $CALL_DIR/build_*.log; echo "built in $(call_elapsed) s"
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/pipe/build/tests/ferry_gpu_tests; F=.ab/pipe/build/tests/ferry_gpu_fault_tests
BASE=build-device/bench/ferry-bench; NEW=.ab/pipe/build/bench/ferry-bench
V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
IPC="$V -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
call_ab ipc_ 2 $BASE $NEW "$IPC" ep --layout expanded --no-nccl
call_ab sm_ 2 $BASE $NEW "$V -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1" ep --layout expanded
U="env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY"
call_run faults 90 $U $F --gtest_filter='KilledPeer.AcrossNodes'
call_run faults_ipc 60 $U UCX_TLS=sm,cuda_ipc,cuda_copy FERRY_UCX_GPU_MEMORY=on FERRY_UCX_PEER_FAILURE=0 $F --gtest_filter='KilledPeer.AcrossNodes'
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
SF="Ep/EpMatrix.DispatchCombine/ht_*_h2048_*:Ep/EpMatrix.DispatchCombine/ll_bf16_h2048_*"
for tool in memcheck racecheck; do call_run san_$tool 90 $M -np 2 $V -x UCX_TLS=sm,self $SAN --tool $tool --error-exitcode 86 $T --gtest_filter="$SF"; done
call_run san_memcheck_ipc 90 $M -np 2 $IPC $SAN --tool memcheck --report-api-errors no --error-exitcode 86 $T --gtest_filter="$SF"
call_ab tcp_ 1 $BASE $NEW "$V -x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1" ep --layout expanded
call_end
