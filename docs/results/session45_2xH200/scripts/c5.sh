# Session 45 c5. run(kind nvidia-h200-x2, carry [".deps"]), ~480 s, main 7cb4b30: several tcp streams by default
# (NOTE [tcp streams by default]: 4 on this host with 2 ranks, 2 with 4 ranks), eager fences, the proxy's quiet
# after a failure; ferry-bench ep --aligned in device_crossnode.sh.
#   1. build; KilledPeer.AcrossNodes over tcp (no MPS); *AllReduce* / Ep* as 2x1 over tcp (4 streams by default);
#   2. issue 24's whole table (scripts/device_crossnode.sh: sm, tcp, cuda_ipc vs NVLink, NCCL in the same processes,
#      EP rows aligned);
#   3. with the time left, under MPS: *AllReduce* / Ep* as 4x1 over tcp (2 streams by default).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 560
{ nvidia-smi -q | grep -iE "product name|bus id"; nproc; } > $CALL_DIR/host.txt 2>&1
call_build_dir build-device "ferry-bench ferry_gpu_tests ferry_gpu_fault_tests"
T=build-device/tests/ferry_gpu_tests; F=build-device/tests/ferry_gpu_fault_tests
M="mpirun --allow-run-as-root --bind-to none"; VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
call_run killed_tcp 60 env UCX_TLS=tcp,self $F --gtest_filter="KilledPeer.AcrossNodes"
call_run tcp_2x1 100 $M -np 2 $VN -x UCX_TLS=tcp,self $T --gtest_filter="*AllReduce*:Ep*"
grep -a "FAILED  \]\|Failure\|Which is\|timed out" $CALL_DIR/tcp_2x1.log | head -12
mkdir -p $CALL_DIR/crossnode
call_run crossnode 250 env OUT=$CALL_DIR/crossnode FERRY_STAGE_TIMEOUT=90 BUILD_DIR=build-device \
  scripts/device_crossnode.sh
cat $CALL_DIR/crossnode/crossnode_table.txt | head -40
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
call_run tcp_4x1 120 $M -np 4 -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY $VN -x UCX_TLS=tcp,self $T \
  --gtest_filter="*AllReduce*:Ep*"
echo quit | nvidia-cuda-mps-control
call_end
