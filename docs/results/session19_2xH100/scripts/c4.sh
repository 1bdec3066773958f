# Session 19, call 4 (nvidia-h100-x2): exp/ar-pieces (c3's tree): the hierarchical AllReduce's blocks per launch
# and pieces over UCX shared memory (2 virtual nodes), NCCL in the same processes, two passes.
# run(kind nvidia-h100-x2, carry [".deps"]): bash docs/results/session19_2xH100/scripts/c4.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 300
call_build_dir build-device "ferry-bench"
M="mpirun --allow-run-as-root --bind-to none -np 2"; B=build-device/bench/ferry-bench
SM="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1"
for pass in 1 2; do
  for b in 32 64; do
    for pc in 8 16 32; do
      call_run p${pass}_b${b}_p$pc 40 $M $SM -x FERRY_HIERARCHICAL_BLOCKS=$b -x FERRY_HIERARCHICAL_PIECES=$pc $B allreduce \
        --algos hierarchical --dtypes bf16 --sizes 512K,1M,2M,4M,8M,16M,64M --csv $CALL_DIR/p${pass}_b${b}_p$pc.csv
      echo "pass $pass blocks $b pieces $pc: $(grep -h -E '^bf16' $CALL_DIR/p${pass}_b${b}_p$pc.log | awk '{printf "%s %s/%s  ", $2, $3, $5}')"
    done
  done
done
call_end
