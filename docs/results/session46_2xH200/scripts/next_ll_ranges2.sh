# Prepared in session 46, NOT run. run(kind nvidia-h200-x2, carry [".deps", ".ab"]), ~300 s. Trees: base=main,
# new=exp/ll-ranges2 (main + FERRY_EP_NET_LL_RANGES, off by default: the direct path's low latency in ranges, its
# halves overlapped on half the SMs each).
# Why: session 46 c2's trace of the low-latency fp8 dispatch over sm (93 us; NCCL 61): layout 5 us, send 24 (its
# stores to host memory drain at ~40 GB/s), 6 us between the grids, receive 55 (it reads the box from host memory
# at ~21 GB/s). Overlapped, the two directions of PCIe would run together. c1 tried ranges at the built-in 512 KiB:
# 2 ranges a box at T=128 (fp8 0.965, bf16 1.02). Here smaller ranges, so the receive starts after a few records.
#   1. new, knob on, 64 KiB ranges: Ep* as 2x1 over sm (correctness);
#   2. one binary (new), knob off / on with FERRY_EP_NET_RANGE_BYTES 64 KiB, 128 KiB, 512 KiB: ll over sm aligned
#      2 rounds each, NCCL beside; cuda_ipc 1 round at 64 KiB.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_ll_ranges2 400
call_base_new ferry_gpu_tests
M2="$M -np 2"; VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
SM="$VN -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1"
IPC="$VN -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
call_run sm_2x1_on 70 $M2 $SM -x FERRY_EP_NET_LL_RANGES=1 -x FERRY_EP_NET_RANGE_BYTES=65536 $T --gtest_filter="Ep*"
grep -a "FAILED  \]\|Failure\|Which is\|timed out" $CALL_DIR/*_2x1*.log | head -12
printf '#!/bin/bash\nexec %s "$@"\n' "$N" > /tmp/off.sh; chmod +x /tmp/off.sh
for rb in 65536 131072 524288; do
  printf '#!/bin/bash\nexport FERRY_EP_NET_LL_RANGES=1 FERRY_EP_NET_RANGE_BYTES=%s\nexec %s "$@"\n' $rb "$N" > /tmp/on$rb.sh
  chmod +x /tmp/on$rb.sh
  call_ab ll${rb}_ 2 /tmp/off.sh /tmp/on$rb.sh "$SM" ep --mode ll --aligned --iters 200 --warmup 20
done
call_ab llipc_ 1 /tmp/off.sh /tmp/on65536.sh "$IPC" ep --mode ll --aligned --iters 200 --warmup 20 --no-nccl
call_end
