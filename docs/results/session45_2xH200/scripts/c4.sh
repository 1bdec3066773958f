# Session 45 c4. run(kind nvidia-h200-x2, carry [".deps", ".ab"]), ~540 s. Trees (scripts/ab_trees.sh):
# base=main 0451f8b (ferry-bench ep --aligned), new=exp/eager-fences 4c2a3d2 (base + NOTE [Eager fences]).
# c3's trace: over tcp the 2 ranks run in anti-phase, so each op's max over ranks is most of an iteration.
# With --aligned (an untimed AllReduce before every op, NCCL's too: NOTE [EP bench: aligned ops]):
#   1. EP expanded over tcp (one virtual node per GPU), NCCL's sockets in the same run: base 1 stream, base and new
#      4 streams; base 4 streams unaligned beside;
#   2. EP over shared memory (sm), aligned and not, NCCL (P2P off) beside;
#   3. AllReduce over tcp: base 1 stream, new 4 streams, NCCL's sockets beside;
#   4. EP inside the node (NVLink), aligned and not: does the alignment change what issue 23 measured.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 545
{ nvidia-smi -q | grep -iE "product name|bus id"; nproc; } > $CALL_DIR/host.txt 2>&1
call_build_trees ferry-bench base new
B=$ROOT/.ab/base/build/bench/ferry-bench; N=$ROOT/.ab/new/build/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none -np 2"; VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
TCP="$VN -x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
SM="$VN -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1"
EP="ep --layout expanded --iters 20 --warmup 5"
run_ep() { local tag=$1; shift; call_run $tag 60 "$@" --csv $CALL_DIR/$tag.csv; }
run_ep tcp_al_base_s1 $M $TCP -x FERRY_UCX_TCP_STREAMS=1 $B $EP --aligned
run_ep tcp_al_base_s4 $M $TCP -x FERRY_UCX_TCP_STREAMS=4 $B $EP --aligned
run_ep tcp_al_new_s4 $M $TCP -x FERRY_UCX_TCP_STREAMS=4 $N $EP --aligned
run_ep tcp_un_new_s4 $M $TCP -x FERRY_UCX_TCP_STREAMS=4 $N $EP
run_ep sm_al $M $SM $B $EP --aligned
run_ep sm_un $M $SM $B $EP
AR="allreduce --sizes 256K,1M,16M,64M --dtypes bf16 --algos auto"
call_run ar_base_s1 50 $M $TCP -x FERRY_UCX_TCP_STREAMS=1 $B $AR --csv $CALL_DIR/ar_base_s1.csv
call_run ar_new_s4 50 $M $TCP -x FERRY_UCX_TCP_STREAMS=4 $N $AR --csv $CALL_DIR/ar_new_s4.csv
run_ep nvl_al $M $B $EP --aligned
run_ep nvl_un $M $B $EP
for f in $CALL_DIR/*.log; do echo "== $(basename $f .log)"; grep -a "^ht\|^ll\|^bf16\|FAIL\|rror" $f | cut -c1-130; done
call_end
