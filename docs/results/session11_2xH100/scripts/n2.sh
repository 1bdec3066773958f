# Session 12 call 2 (prepared in session 11): main: issue 24's table (tcp with 64 KiB segments and 256 KiB pieces),
# the cuda_ipc killed-peer and memcheck stages, AllReduce against torch symmetric memory.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
O=$OUT/n2; mkdir -p $O; t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $O/cfg_main.log 2>&1
cmake --build build-device -j30 --target ferry-bench ferry_gpu_tests ferry_gpu_fault_tests > $O/build_main.log 2>&1 || { grep " error" $O/build_main.log | head; exit 1; }
echo "built in $(el) s"
M="mpirun --allow-run-as-root --bind-to none"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 200 $M -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0 -x FERRY_TIMEOUT_MS=120000 $SAN --tool memcheck --error-exitcode 86 build-device/tests/ferry_gpu_tests --gtest_filter="Ep/EpMatrix.DispatchCombine/ht_fp8_h2048_k3:Ep/EpMatrix.DispatchCombine/ll_bf16_h2048_k7:Ep.HandleReuse:All/AllReduceMatrix.*/hierarchical*_bf16" > $O/memcheck_2x1_cuda_ipc.log 2>&1 &
ps=$!
timeout 150 env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY UCX_TLS=sm,cuda_ipc,cuda_copy FERRY_UCX_GPU_MEMORY=on FERRY_UCX_PEER_FAILURE=0 build-device/tests/ferry_gpu_fault_tests --gtest_filter='KilledPeer.AcrossNodes' > $O/gpu_faults_cuda_ipc.log 2>&1; echo "faults cuda_ipc rc=$? ($(el) s)"
wait $ps; echo "memcheck cuda_ipc rc=$? ($(el) s) $(grep -E 'ERROR SUMMARY|PASSED  \]|FAILED  \]' $O/memcheck_2x1_cuda_ipc.log | sort | uniq -c | tr '\n' ' ')"
OUT=$O/crossnode timeout $(( 480 - $(el) )) scripts/device_crossnode.sh > $O/crossnode.txt 2>&1; echo "crossnode rc=$? ($(el) s)"
grep -E "^(sm|tcp|cuda_ipc) " $O/crossnode/crossnode_table.txt
cd $O && tar czf /tmp/n2.tgz . && find . -mindepth 1 -delete && mv /tmp/n2.tgz .
