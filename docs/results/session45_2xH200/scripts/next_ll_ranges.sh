# Prepared in session 45, NOT run. run(kind nvidia-h200-x2, carry [".deps"]), ~330 s, from a checkout of
# exp/ll-ranges (FERRY_EP_NET_LL_RANGES: the direct path's low latency in ranges, so its halves overlap).
# Why: over UCX shared memory the low-latency dispatch runs its halves one after the other (session 45 c5: fp8
# send 37.8 + receive 57.6 us, fused 91.0, NCCL 61.2; bf16 118.2 against 97.5): with ranges the receive half can
# place the first rows while the send half still writes the rest (high throughput does so).
#   1. build; Ep* as 2x1 over sm and over tcp with the knob on (correctness: every EP test, LL included);
#   2. ferry-bench ep --mode ll --aligned --check with the knob on, over sm / tcp / cuda_ipc;
#   3. A/B in one binary, knob by wrapper (0 = main's path), EP ll over sm aligned, 3 rounds; cuda_ipc 1 round.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_ll_ranges 560
call_build_dir build-device "ferry-bench ferry_gpu_tests"
T=build-device/tests/ferry_gpu_tests; N=$ROOT/build-device/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none -np 2"; VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
SM="$VN -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1"; TCP="$VN -x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
IPC="$VN -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
call_run sm_2x1_on 100 $M $SM -x FERRY_EP_NET_LL_RANGES=1 $T --gtest_filter="Ep*"
call_run tcp_2x1_on 100 $M $TCP -x FERRY_EP_NET_LL_RANGES=1 $T --gtest_filter="Ep*"
grep -a "FAILED  \]\|Failure\|Which is\|timed out" $CALL_DIR/*_2x1_on.log | head -12
for t in SM TCP IPC; do
  call_run check_$t 40 $M ${!t} -x FERRY_EP_NET_LL_RANGES=1 $N ep --mode ll --aligned --check --iters 20 --csv ""
done
for k in 0 1; do
  printf '#!/bin/bash\nexport FERRY_EP_NET_LL_RANGES=%s\nexec %s "$@"\n' $k "$N" > /tmp/r$k.sh; chmod +x /tmp/r$k.sh
done
call_ab ll_sm_ 3 /tmp/r0.sh /tmp/r1.sh "$SM" ep --mode ll --aligned --iters 200 --warmup 20
call_ab ll_ipc_ 1 /tmp/r0.sh /tmp/r1.sh "$IPC" ep --mode ll --aligned --iters 200 --warmup 20 --no-nccl
call_end
