# Session 45 c2. run(kind nvidia-h200-x2, carry [".deps", ".ab"]), ~560 s. Trees (scripts/ab_trees.sh):
# base=main 91d2786, new=exp/eager-fences (NOTE [Eager fences]: a fence's flushes are sent when it is issued).
# c1 found: with 4 tcp streams the fused EP over tcp is ~7 ms slower per call than its halves run one after the
# other (bf16 17.7 ms against 1.3 + 9.4; fp8 13.3 against 0.7 + 5.2; combine 17.3 against 1.3 + 8.8), while with one
# stream fused = halves. Which of the suspects: the fence convoy (each fence flushed everything issued while the one
# before it was in progress), the lanes' naps (FERRY_PROXY_IDLE_SPINS=0: never), a fence per range
# (FERRY_PROXY_HOLD_SIGNALS_BYTES=64M: one per batch), the stream count (2)?
#   1. build both trees; 2. EP expanded over tcp, one run per configuration (ht T=4096 and ll T=128, --halves);
#   3. AllReduce over tcp base s4 / new s4 (does the fix keep the AllReduce's gain).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 570
{ nvidia-smi -q | grep -iE "product name|bus id"; nproc; } > $CALL_DIR/host.txt 2>&1
call_build_trees ferry-bench base new
B=$ROOT/.ab/base/build/bench/ferry-bench; N=$ROOT/.ab/new/build/bench/ferry-bench
ls -la $B $N
M="mpirun --allow-run-as-root --bind-to none -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
TCP="-x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
EP="ep --layout expanded --no-nccl --iters 10 --warmup 3 --halves"
ep() { local tag=$1 bin=$2; shift 2; call_run ep_$tag 45 $M $TCP "$@" $bin $EP --csv $CALL_DIR/ep_$tag.csv; }
ep base_s1 $B -x FERRY_UCX_TCP_STREAMS=1
ep base_s4 $B -x FERRY_UCX_TCP_STREAMS=4
ep new_s4 $N -x FERRY_UCX_TCP_STREAMS=4
ep new_s2 $N -x FERRY_UCX_TCP_STREAMS=2
ep base_s4_spin $B -x FERRY_UCX_TCP_STREAMS=4 -x FERRY_PROXY_IDLE_SPINS=0
ep base_s4_hold $B -x FERRY_UCX_TCP_STREAMS=4 -x FERRY_PROXY_HOLD_SIGNALS_BYTES=67108864
ep new_s4_hold $N -x FERRY_UCX_TCP_STREAMS=4 -x FERRY_PROXY_HOLD_SIGNALS_BYTES=67108864
ep new_s4_stats $N -x FERRY_UCX_TCP_STREAMS=4 -x FERRY_PROXY_STATS=1
ep base_s1_stats $B -x FERRY_UCX_TCP_STREAMS=1 -x FERRY_PROXY_STATS=1
for f in $CALL_DIR/ep_*.log; do echo "== $(basename $f)"; grep -a "^ht\|^ll\|halves\|proxy per" $f | cut -c1-150; done
AR="allreduce --sizes 256K,1M,16M,64M --dtypes bf16 --algos auto --no-nccl"
call_run ar_base_s4 40 $M $TCP -x FERRY_UCX_TCP_STREAMS=4 $B $AR
call_run ar_new_s4 40 $M $TCP -x FERRY_UCX_TCP_STREAMS=4 $N $AR
call_run ar_base_s1 40 $M $TCP -x FERRY_UCX_TCP_STREAMS=1 $B $AR
grep -a "bf16" $CALL_DIR/ar_*.log | head -20
call_end
