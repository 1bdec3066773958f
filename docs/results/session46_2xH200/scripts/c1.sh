# Session 46 c1. run(kind nvidia-h200-x2, carry [".deps"]), ~560 s, main dff7a83 (15c0298, session 45's review
# mends, CPU-tested only; + FERRY_EP_NET_LL_RANGES, off by default).
#   1. build; KilledPeer.AcrossNodes over tcp (no MPS); *AllReduce* / Ep* as 2x1 over sm and over tcp (main's code);
#   2. the low-latency dispatch over UCX shared memory in ranges (FERRY_EP_NET_LL_RANGES=1): Ep* as 2x1 over sm and
#      tcp with it on; ferry-bench ep --mode ll --aligned --check with it on over sm / tcp / cuda_ipc; A/B in one
#      binary (knob by wrapper), ll over sm aligned 3 rounds, cuda_ipc 1 round.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 560
{ nvidia-smi -q | grep -iE "product name|bus id"; nproc; nvidia-smi topo -m; lscpu | grep -iE "numa|socket|model name"; } \
  > $CALL_DIR/host.txt 2>&1
call_build_dir build-device "ferry-bench ferry_gpu_tests ferry_gpu_fault_tests"
T=build-device/tests/ferry_gpu_tests; F=build-device/tests/ferry_gpu_fault_tests; N=$ROOT/build-device/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none -np 2"; VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
SM="$VN -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1"; TCP="$VN -x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
IPC="$VN -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
call_run killed_tcp 60 env UCX_TLS=tcp,self $F --gtest_filter="KilledPeer.AcrossNodes"
call_run sm_2x1 100 $M $SM $T --gtest_filter="*AllReduce*:Ep*"
call_run tcp_2x1 100 $M $TCP $T --gtest_filter="*AllReduce*:Ep*"
call_run sm_2x1_llr 80 $M $SM -x FERRY_EP_NET_LL_RANGES=1 $T --gtest_filter="Ep*"
grep -a "FAILED  \]\|Failure\|Which is\|timed out" $CALL_DIR/*_2x1*.log | head -12
for t in SM TCP IPC; do
  call_run check_$t 40 $M ${!t} -x FERRY_EP_NET_LL_RANGES=1 $N ep --mode ll --aligned --check --iters 20 --csv ""
  grep -a "^ll\|mismatch\|FAIL" $CALL_DIR/check_$t.log | head -8
done
for k in 0 1; do
  printf '#!/bin/bash\nexport FERRY_EP_NET_LL_RANGES=%s\nexec %s "$@"\n' $k "$N" > /tmp/r$k.sh; chmod +x /tmp/r$k.sh
done
call_ab ll_sm_ 3 /tmp/r0.sh /tmp/r1.sh "$SM" ep --mode ll --aligned --iters 200 --warmup 20
call_ab ll_ipc_ 1 /tmp/r0.sh /tmp/r1.sh "$IPC" ep --mode ll --aligned --iters 200 --warmup 20 --no-nccl
call_run tcp_2x1_llr 80 $M $TCP -x FERRY_EP_NET_LL_RANGES=1 $T --gtest_filter="Ep*"
call_end
