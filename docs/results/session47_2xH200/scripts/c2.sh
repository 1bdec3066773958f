# Session 47 c2 (prepared in session 46 as next46.sh). run(kind nvidia-h200-x2, carry [".deps", ".ab"]), ~520 s. Trees
# (scripts/ab_trees.sh base=main new=exp/next46): new = main + two designs for the shared-memory dispatch
# (session 46 c5: high throughput bf16 / fp8 0.88 / 0.85x NCCL, low latency 0.86 / 0.69x; combine 1.27 / 1.06x):
#   a. NOTE [EP across nodes: aligned records] (always on in new): the dispatch box's header, records and rows on
#      128 bytes. Before, records were 16-byte multiples after a 1040-byte header, every bf16 row 112 bytes past a
#      line; the combine, whose partial rows are 128-byte multiples, crosses the same PCIe at 1.27x NCCL. Partly
#      written lines of host memory cost short PCIe writes and read-modify-writes.
#   b. FERRY_EP_NET_LL_RANGES=1 (off by default) with FERRY_EP_NET_RANGE_BYTES 64 / 128 KiB: the low-latency
#      halves overlapped on half the SMs each, the receive reading while the send writes (c2's trace: fp8 93 us =
#      layout 5 + send 24 + 6 between grids + receive 55, halves one after the other; c1 tried 512 KiB ranges, 2 a
#      box at T=128: fp8 0.965, bf16 1.019).
# Stages: 1. new: Ep* as 2x1 over sm and tcp, as 2x2 over tcp under MPS (the hierarchical path copies records), and
# over sm with b on; 2. A/B base / new (a), aligned: both modes over sm 3 rounds (NCCL beside), cuda_ipc 1, tcp ht 1;
# 3. new alone, b off / on at 64 and 128 KiB: ll over sm 2 rounds each, cuda_ipc 1 at 64 KiB.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 540
call_base_new ferry_gpu_tests
call_virtual_nodes
call_run sm_2x1 70 $M2 $SM $T --gtest_filter="Ep*"
call_run tcp_2x1 80 $M2 $TCP $T --gtest_filter="Ep*"
call_run sm_2x1_llr 70 $M2 $SM -x FERRY_EP_NET_LL_RANGES=1 -x FERRY_EP_NET_RANGE_BYTES=65536 $T --gtest_filter="Ep*"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
call_run tcp_2x2 100 $M -np 4 -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x FERRY_TEST_SHARE_GPUS=1 \
  -x UCX_TLS=tcp,self -x FERRY_RANKS_PER_NODE=2 $T --gtest_filter="Ep*"
echo quit | nvidia-cuda-mps-control
grep -a "FAILED  \]\|Failure\|Which is\|timed out" $CALL_DIR/*_2x*.log | head -12
call_ab sm_ 3 $B $N "$SM" ep --aligned --iters 60 --warmup 5
call_ab ipc_ 1 $B $N "$IPC" ep --aligned --iters 60 --warmup 5 --no-nccl
call_ab tcp_ 1 $B $N "$TCP" ep --mode ht --aligned --iters 20 --warmup 3 --no-nccl
printf '#!/bin/bash\nexec %s "$@"\n' "$N" > /tmp/off.sh; chmod +x /tmp/off.sh
for rb in 65536 131072; do
  printf '#!/bin/bash\nexport FERRY_EP_NET_LL_RANGES=1 FERRY_EP_NET_RANGE_BYTES=%s\nexec %s "$@"\n' $rb "$N" > /tmp/on$rb.sh
  chmod +x /tmp/on$rb.sh
  call_ab ll${rb}_ 2 /tmp/off.sh /tmp/on$rb.sh "$SM" ep --mode ll --aligned --iters 200 --warmup 20
done
call_ab llipc_ 1 /tmp/off.sh /tmp/on65536.sh "$IPC" ep --mode ll --aligned --iters 200 --warmup 20 --no-nccl
call_end
