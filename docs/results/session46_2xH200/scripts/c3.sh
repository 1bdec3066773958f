# Session 46 c3. run(kind nvidia-h200-x2, carry [".deps", ".ab"]), ~480 s. Trees (scripts/ab_trees.sh): base=main
# 0b95fb2, new=exp/recv-one-rtt 23aca38 (NOTE [EP receive: loads in one round trip]: the cross-node dispatch's
# receive issues a record's meta, first row units and scale loads together; c2's trace: the low-latency dispatch
# over sm spent 11-49 us placing 1024 items, up to six dependent PCIe round trips each).
#   1. new: Ep* as 2x1 over sm and over tcp; ferry-bench ep --check (ll, ht) over sm / tcp / cuda_ipc;
#   2. A/B base/new: ll over sm aligned 3 rounds, ht over sm aligned 2, ll and ht over cuda_ipc 1;
#   3. new alone: FERRY_EP_CHUNK_COLS=1024 against the built-in 2048 for ll over sm (more warps, fewer loads each).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 500
call_base_new ferry_gpu_tests
M2="$M -np 2"; VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
SM="$VN -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1"; TCP="$VN -x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
IPC="$VN -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
call_run sm_2x1 80 $M2 $SM $T --gtest_filter="Ep*"
call_run tcp_2x1 80 $M2 $TCP $T --gtest_filter="Ep*"
grep -a "FAILED  \]\|Failure\|Which is\|timed out" $CALL_DIR/*_2x1.log | head -12
for t in SM TCP IPC; do
  call_run check_$t 60 $M2 ${!t} $N ep --aligned --check --iters 10 --warmup 2 --csv "" --no-nccl
  grep -a "^ll\|^ht\|mismatch\|FAIL\|rror" $CALL_DIR/check_$t.log | head -8
done
call_ab ll_sm_ 3 $B $N "$SM" ep --mode ll --aligned --iters 200 --warmup 20
call_ab ht_sm_ 2 $B $N "$SM" ep --mode ht --aligned --iters 60 --warmup 5 --no-nccl
call_ab ll_ipc_ 1 $B $N "$IPC" ep --mode ll --aligned --iters 200 --warmup 20 --no-nccl
call_ab ht_ipc_ 1 $B $N "$IPC" ep --mode ht --aligned --iters 60 --warmup 5 --no-nccl
printf '#!/bin/bash\nexport FERRY_EP_CHUNK_COLS=1024\nexec %s "$@"\n' "$N" > /tmp/c1024.sh; chmod +x /tmp/c1024.sh
call_ab llc1024_ 2 $N /tmp/c1024.sh "$SM" ep --mode ll --aligned --iters 200 --warmup 20 --no-nccl
call_end
