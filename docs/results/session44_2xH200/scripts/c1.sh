# Session 44 c1. run(kind nvidia-h200-x2, carry [".deps"]), ~580 s, main 64df4cd (session 43's final code).
#   1. build; 2. loopback tcp with 1 / 2 / 4 ucx_perftest streams per direction, both directions at once (host
#      only: session43_2xH200/scripts/next_tcp_streams.sh): does a second stream per direction pay before we build it;
#   3. the final net code of session 43 (review mends, UcxRegions, IdleBackoff: CPU-tested only so far) on GPUs:
#      KilledPeer.AcrossNodes over tcp (no MPS), *AllReduce* / Ep* as 2x1 over tcp and sm (one virtual node per GPU);
#   4. issue 24's whole table with the receive worker (scripts/device_crossnode.sh: sm, tcp, cuda_ipc vs NVLink,
#      NCCL in the same processes; sm rows never measured on H200);
#   5. with the time left, under MPS: *AllReduce* / Ep* as 4x1 over tcp (3 remote senders per receive thread).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 575
{ nvidia-smi -q | grep -iE "product name|bus id"; nproc; } > $CALL_DIR/host.txt 2>&1
call_build_dir build-device "ferry-bench ferry_gpu_tests ferry_gpu_fault_tests"
call_run streams 60 env OUT=$CALL_DIR bash docs/results/session43_2xH200/scripts/next_tcp_streams.sh
cat $CALL_DIR/streams.log
T=build-device/tests/ferry_gpu_tests; F=build-device/tests/ferry_gpu_fault_tests
M="mpirun --allow-run-as-root --bind-to none"; VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
call_run killed_tcp 90 env UCX_TLS=tcp,self $F --gtest_filter="KilledPeer.AcrossNodes"
call_run tcp_2x1 100 $M -np 2 $VN -x UCX_TLS=tcp,self $T --gtest_filter="*AllReduce*:Ep*"
call_run sm_2x1 100 $M -np 2 $VN -x UCX_TLS=sm,self $T --gtest_filter="*AllReduce*:Ep*"
grep -a "FAILED  \]\|Failure\|Which is\|timed out" $CALL_DIR/tcp_2x1.log $CALL_DIR/sm_2x1.log | head -12
mkdir -p $CALL_DIR/crossnode
call_run crossnode 230 env OUT=$CALL_DIR/crossnode FERRY_STAGE_TIMEOUT=90 BUILD_DIR=build-device \
  scripts/device_crossnode.sh
cat $CALL_DIR/crossnode/crossnode_table.txt | head -40
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
call_run tcp_4x1 150 $M -np 4 -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY $VN -x UCX_TLS=tcp,self $T \
  --gtest_filter="*AllReduce*:Ep*"
echo quit | nvidia-cuda-mps-control
call_end
