# Session 43 c7: the command run(kind nvidia-h200-x2) ran on c6's warm machine (build-device from c6 kept there):
# 3 rounds of the AllReduce over tcp alternating FERRY_UCX_RECEIVE_THREAD=1 / 0, NCCL's sockets in the same processes.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1; source scripts/common.sh
ferry_export_env; ferry_device_cmake_args build-device >/dev/null 2>&1; ferry_nccl_library_path
ls build-device/bench/ferry-bench || exit 1; mkdir -p $OUT/c7
M="mpirun --allow-run-as-root --bind-to none -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
for r in 1 2 3; do for k in 1 0; do
  timeout 50 $M -x FERRY_UCX_RECEIVE_THREAD=$k build-device/bench/ferry-bench allreduce --sizes 1M,16M,64M \
    --dtypes bf16 --algos auto --csv $OUT/c7/ar_k${k}_$r.csv > $OUT/c7/ar_k${k}_$r.log 2>&1
  echo "round $r knob $k"; grep -a "^bf16" $OUT/c7/ar_k${k}_$r.log
done; done
