# Prepared in session 43, NOT run. run(kind nvidia-h200-x2 or nvidia-h100-x2, carry [".deps"]), ~500 s, from a
# checkout of main: issue 24's whole table from one call (scripts/device_crossnode.sh: AllReduce and EP over shared
# memory and tcp against NCCL in the same processes, EP over cuda_ipc against NVLink), now with the tcp receive
# worker (NOTE [A receive worker for tcp]); then the EP suites as 4x1 over tcp (3 remote senders per receive thread).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_crossnode 590
{ nvidia-smi -q | grep -iE "product name|bus id"; nproc; } > $CALL_DIR/host.txt 2>&1
call_build_dir build-device "ferry-bench ferry_gpu_tests"
call_run crossnode 420 env OUT=$CALL_DIR/crossnode BUILD_DIR=build-device scripts/device_crossnode.sh
call_run tcp_4x1 120 mpirun --allow-run-as-root --bind-to none -np 4 -x FERRY_TEST_SHARE_GPUS=1 \
  -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=tcp,self build-device/tests/ferry_gpu_tests --gtest_filter="Ep*:*AllReduce*"
cat $CALL_DIR/crossnode/crossnode_table.txt
call_end
