# For the next session with 2 GPUs (nvidia-h100-x2 or nvidia-h200-x2): run(kind ..., carry [".deps", ".ab"]),
# ~580 s. Trees: scripts/ab_trees.sh base=main new=main+docs/results/session48_1xH200/scripts/ll_overlap_sm.patch
# The low-latency halves across nodes overlapped where every remote peer's landing is mapped (UCX shared memory):
# on one H200 (c5, c5b: a direction) the dispatch read 0.93-0.97 of main's time, combine unchanged. Here, one
# virtual node per GPU: Ep* as 2x1 over sm (new), then the A/B over sm with NCCL beside (NCCL_P2P_DISABLE=1), 3
# rounds, low latency at T=128 and 512; land only with no case slower. tcp and cuda_ipc do not take the overlap.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next48 ${NEXT48_BUDGET:-520}
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
call_base_new ferry_gpu_tests
call_virtual_nodes
call_run sm_2x1 150 $M2 $SM $T --gtest_filter="Ep*"
grep -a "FAILED  \]\|Failure\|timed out" $CALL_DIR/sm_2x1.log | head -8
call_ab sm_ll_ 3 "$B" "$N" "$SM" ep --mode ll --aligned --tokens 128,512 --check --iters 30 --warmup 5
grep -h "check:" $CALL_DIR/ab/*.log | sort | uniq -c
# What the low-latency receive's read rate is (c8 ruled out the memory kind and the item size): host memory the peer
# GPU has just written against memory this GPU has (ferry-bench pcie-peer, not yet run on a GPU when written).
call_run pcie_peer 60 $M2 $N pcie-peer --sms 8,32,66,132 --bytes 16M --item-bytes 1792
call_run pcie_peer_rows 60 $M2 $N pcie-peer --sms 8,32,132 --bytes 16M
grep -hE "^(own|peer)_" $CALL_DIR/pcie_peer*.log  # own_load_alone (session 49): one GPU at a time
# Session 49: a host load's and a system fence's wait while the GPU streams host stores, on each GPU alone.
for g in 0 1; do
  call_run pcie_latency_gpu$g 30 env CUDA_VISIBLE_DEVICES=$g ${M:-mpirun --allow-run-as-root --bind-to none} -np 1 \
    $N pcie-latency --sms 8,32,131 --bytes 256M
  tail -5 $CALL_DIR/pcie_latency_gpu$g.log
done
call_end
