# Session 46 c4. run(kind nvidia-h200-x2, carry [".deps", ".ab"]), ~420 s. Trees (scripts/ab_trees.sh): base=main
# 05a1d42, new=exp/claim-items b60fefe: c3's early loads for low latency only (high throughput as before) and
# FERRY_EP_NET_CLAIM_ITEMS (off by default): the cross-node dispatch send's warps claim items from a counter, for
# c2's trace (over sm the 12 send blocks finished their fixed shares 0.8 to 2.2 ms into a 2.6 ms call).
#   1. new, knob on: Ep* as 2x1 over sm; ferry-bench ep --check over tcp and cuda_ipc;
#   2. A/B base / new (knob off): both modes over sm 2 rounds, cuda_ipc 1;
#   3. A/B new knob off / on: ht over sm 2 rounds, cuda_ipc and tcp 1.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 470
call_base_new ferry_gpu_tests
M2="$M -np 2"; VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
SM="$VN -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1"; TCP="$VN -x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
IPC="$VN -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
call_run sm_2x1_claim 80 $M2 $SM -x FERRY_EP_NET_CLAIM_ITEMS=1 $T --gtest_filter="Ep*"
grep -a "FAILED  \]\|Failure\|Which is\|timed out" $CALL_DIR/*_2x1*.log | head -12
for t in TCP IPC; do
  call_run check_$t 60 $M2 ${!t} -x FERRY_EP_NET_CLAIM_ITEMS=1 $N ep --mode ht --aligned --check --iters 10 --warmup 2 \
    --csv "" --no-nccl
  grep -a "^ht\|mismatch\|FAIL\|rror" $CALL_DIR/check_$t.log | head -8
done
call_ab sm_ 2 $B $N "$SM" ep --aligned --iters 60 --warmup 5
call_ab ipc_ 1 $B $N "$IPC" ep --aligned --iters 60 --warmup 5 --no-nccl
printf '#!/bin/bash\nexport FERRY_EP_NET_CLAIM_ITEMS=1\nexec %s "$@"\n' "$N" > /tmp/claim.sh; chmod +x /tmp/claim.sh
call_ab claim_sm_ 2 $N /tmp/claim.sh "$SM" ep --mode ht --aligned --iters 60 --warmup 5 --no-nccl
call_ab claim_ipc_ 1 $N /tmp/claim.sh "$IPC" ep --mode ht --aligned --iters 60 --warmup 5 --no-nccl
call_ab claim_tcp_ 1 $N /tmp/claim.sh "$TCP" ep --mode ht --aligned --iters 20 --warmup 3 --no-nccl
call_end
