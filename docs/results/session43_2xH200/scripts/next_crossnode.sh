# Prepared in session 43, NOT run. run(kind nvidia-h200-x2 or nvidia-h100-x2, carry [".deps"]), ~590 s (stages past
# the budget are skipped: split it if the table runs long), from a
# checkout of main: issue 24's whole table from one call (scripts/device_crossnode.sh: AllReduce and EP over shared
# memory and tcp against NCCL in the same processes, EP over cuda_ipc against NVLink), now with the tcp receive
# worker (NOTE [A receive worker for tcp]); then the EP suites as 4x1 over tcp (3 remote senders per receive thread);
# then, with the transfer now ~1.4x faster, the hierarchical AllReduce's blocks over tcp again (4, tcp's default since
# session 28, against 8 and 16: the staging copy and the last reduction run on one SM per block, ~1.5 ms each at
# 64 MB on 4 blocks), one binary, knob by wrapper, 3 rounds, NCCL's sockets in the run.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_crossnode 590
{ nvidia-smi -q | grep -iE "product name|bus id"; nproc; } > $CALL_DIR/host.txt 2>&1
call_build_dir build-device "ferry-bench ferry_gpu_tests"
call_run crossnode 420 env OUT=$CALL_DIR/crossnode BUILD_DIR=build-device scripts/device_crossnode.sh
call_run tcp_4x1 120 mpirun --allow-run-as-root --bind-to none -np 4 -x FERRY_TEST_SHARE_GPUS=1 \
  -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=tcp,self build-device/tests/ferry_gpu_tests --gtest_filter="Ep*:*AllReduce*"
cat $CALL_DIR/crossnode/crossnode_table.txt
N=$ROOT/build-device/bench/ferry-bench
for b in 8 16; do
  printf '#!/bin/bash\nexport FERRY_HIERARCHICAL_BLOCKS=%s\nexec %s "$@"\n' $b "$N" > /tmp/blocks$b.sh
  chmod +x /tmp/blocks$b.sh
  call_ab blocks${b}_ 3 $N /tmp/blocks$b.sh "-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=tcp,self \
    -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1" allreduce --sizes 4M,16M,64M --dtypes bf16 --algos auto
done
call_end
