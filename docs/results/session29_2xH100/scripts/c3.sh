# Session 29 c3: run(kind nvidia-h100-x2, carry [".deps"]) on branch tcp-block-bytes (main d5eeae4 + one block
# per 256 KiB of a shard over tcp alone). The AllReduce suites over tcp (2x1, 2x2) and killed peers over tcp on it;
# the cuda_ipc path (GPU-memory windows moved by UCX), not run since session 23 and so never on session 28's held
# signals: Ep* / AllReduce as 2x1, killed peers, memcheck; then issue 24's ar_tcp, ep_cuda_ipc and ep_nvlink rows.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 560
call_build_dir build-device "ferry-bench ferry_gpu_tests ferry_gpu_fault_tests"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests
F=build-device/tests/ferry_gpu_fault_tests; U="env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
IPC="$VN -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
call_run ar_2x1_tcp 60 $M -np 2 $VN -x UCX_TLS=tcp,self $T --gtest_filter='*AllReduce*'
call_run ar_2x2_tcp 60 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 -x UCX_TLS=tcp,self $T \
  --gtest_filter='*AllReduce*'
call_run faults_tcp 60 $U UCX_TLS=tcp,self $F --gtest_filter='KilledPeer.AcrossNodes'
call_run ipc_2x1 90 $M -np 2 $IPC $T --gtest_filter='Ep*:*AllReduce*'
call_run faults_ipc 60 $U UCX_TLS=sm,cuda_ipc,cuda_copy FERRY_UCX_GPU_MEMORY=on FERRY_UCX_PEER_FAILURE=0 $F \
  --gtest_filter='KilledPeer.AcrossNodes'
call_run ipc_memcheck 60 $M -np 2 $IPC $SAN --tool memcheck --error-exitcode 86 $T \
  --gtest_filter='Ep/EpMatrix.DispatchCombine/*bf16*:Ep.HandleReuse'
mkdir -p $CALL_DIR/crossnode
OUT=$CALL_DIR/crossnode FERRY_STAGE_TIMEOUT=90 BUILD_DIR=build-device FERRY_CROSSNODE_STAGES="ar_tcp ep_cuda_ipc ep_nvlink" \
  timeout $(( $(call_left) - 10 )) scripts/device_crossnode.sh > $CALL_DIR/crossnode.txt 2>&1
echo "crossnode rc=$? ($(call_elapsed) s)"
grep -E "^(tcp|cuda_ipc) " $CALL_DIR/crossnode/crossnode_table.txt
call_end
