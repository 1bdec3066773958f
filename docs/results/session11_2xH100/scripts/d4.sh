# Session 11 call 4: killed peers (gpu_faults), DeepEP 567632d beside ferry, issue 24's cross-node table (scripts/device_crossnode.sh).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
O=$OUT/d4; mkdir -p $O; t0=$(date +%s)
ferry_device_cmake_args build-device; ferry_nccl_library_path
cmake --build build-device -j16 --target ferry-bench ferry_gpu_fault_tests > $O/build_main.log 2>&1 || { grep " error" $O/build_main.log | head; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
timeout 120 env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY build-device/tests/ferry_gpu_fault_tests --gtest_filter='KilledPeer.*' > $O/gpu_faults.log 2>&1; echo "gpu_faults rc=$? $(grep -E 'PASSED  \]|FAILED  \]' $O/gpu_faults.log | tr '\n' ' ') ($(( $(date +%s) - t0 )) s)"
FERRY_DEEPEP_TIMEOUT=150 OUT=$O/deepep timeout 330 scripts/device_deepep.sh > $O/deepep.txt 2>&1; echo "deepep rc=$? ($(( $(date +%s) - t0 )) s)"; tail -25 $O/deepep.txt
OUT=$O/crossnode timeout $(( 560 - ($(date +%s) - t0) )) scripts/device_crossnode.sh > $O/crossnode.txt 2>&1; echo "crossnode rc=$? ($(( $(date +%s) - t0 )) s)"; tail -30 $O/crossnode.txt
cd $O && tar czf /tmp/d4.tgz . && find . -mindepth 1 -delete && mv /tmp/d4.tgz .
