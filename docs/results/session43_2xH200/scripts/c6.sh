# Session 43 c6. run(kind nvidia-h200-x2, carry [".deps"]), ~300 s, main 8ed7449 (the tcp receive worker merged).
# Issue 24's tcp rows on 2 real GPUs, one virtual node per GPU, NCCL's sockets in the same processes
# (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1), as scripts/device_crossnode.sh's ar_tcp / ep_tcp stages; the AllReduce
# also with FERRY_UCX_RECEIVE_THREAD=0 (main before the merge: one worker) in the same call.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 330
{ nvidia-smi -q | grep -iE "product name|bus id"; nproc; } > $CALL_DIR/host.txt 2>&1
call_build_dir build-device ferry-bench
N=build-device/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
TCP="-x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
AR="allreduce --sizes 256K,1M,16M,64M --dtypes bf16 --algos auto"
call_run ar_tcp 60 $M $TCP $N $AR --csv $CALL_DIR/ar_tcp.csv
call_run ar_tcp_one_worker 60 $M $TCP -x FERRY_UCX_RECEIVE_THREAD=0 $N $AR --csv $CALL_DIR/ar_tcp_one_worker.csv
call_run ar_tcp_2 60 $M $TCP $N $AR --csv $CALL_DIR/ar_tcp_2.csv
call_run ep_tcp 100 $M $TCP $N ep --layout expanded --iters 20 --warmup 5 --csv $CALL_DIR/ep_tcp.csv
for f in ar_tcp ar_tcp_one_worker ar_tcp_2 ep_tcp; do echo "== $f"; grep -a -A12 "^dtype\|^mode\|dispatch\|combine" $CALL_DIR/$f.log | grep -av "warning" | head -14; done
call_end
