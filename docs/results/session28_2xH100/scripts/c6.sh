# Session 28, c6: run(kind nvidia-h100-x2, carry [".deps"]) on exp/held-signals: the hierarchical AllReduce's
# blocks over tcp with held signals (FERRY_HIERARCHICAL_BLOCKS 16 = built-in against 4 and 8), and the proxy
# alone in 1 / 4 / 16 pieces per exchange.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 300
call_build_dir build-device "ferry-bench"
M="mpirun --allow-run-as-root --bind-to none"; B=build-device/bench/ferry-bench
for k in 1 4 16; do
  echo "== pieces $k" >> $CALL_DIR/exchange_tcp.txt
  timeout 60 $M -np 2 -x UCX_TLS=tcp,self $B net --exchange --pieces $k --sizes 256K,1M,4M,16M --bytes 64M 2>&1 |
    grep "^exchange" >> $CALL_DIR/exchange_tcp.txt
done
cat $CALL_DIR/exchange_tcp.txt
for v in 4 8 16; do
  printf '#!/usr/bin/env bash\nexport FERRY_HIERARCHICAL_BLOCKS=%s\nexec %s "$@"\n' $v "$ROOT/$B" > $CALL_DIR/b$v
  chmod +x $CALL_DIR/b$v
done
TCP="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
call_ab b4_ 3 $CALL_DIR/b16 $CALL_DIR/b4 "$TCP" allreduce --sizes 256K,1M,4M,16M,64M --dtypes bf16 --algos hierarchical
call_ab b8_ 3 $CALL_DIR/b16 $CALL_DIR/b8 "$TCP" allreduce --sizes 256K,1M,4M,16M,64M --dtypes bf16 --algos hierarchical
rm -f $CALL_DIR/b4 $CALL_DIR/b8 $CALL_DIR/b16
call_end
