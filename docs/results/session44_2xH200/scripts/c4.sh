# Session 44 c4. run(kind nvidia-h200-x2, carry [".deps"]), ~560 s, the working tree of exp/tcp-streams
# (NOTE [Several tcp streams], src/net/ucx_send_lanes.hpp; FERRY_UCX_TCP_STREAMS, default 2 in this tree).
# One virtual node per GPU (FERRY_RANKS_PER_NODE=1), UCX over loopback tcp, NCCL's sockets in the same processes.
# After c3 (AllReduce 16 / 64 MB 0.43 / 0.63 of one stream with 4, EP 1.15-2.6x slower): pieces back to 4 MiB (each
# tcp put costs about a round trip), lane 0 driven by the proxy thread itself, puts under 2 MiB (signals, low-latency
# EP) on lane 0; data puts still never wait behind a fence.
#   1. build; 2. *AllReduce* / Ep* as 2x1 over tcp with 2 and 4 streams; KilledPeer.AcrossNodes over tcp (no MPS);
#   3. the proxy alone: ferry-bench net --both-ways and --exchange with 1 / 2 / 4 streams;
#   4. A/B in one binary, knob by wrapper: 1 stream (= main: the receive worker of session 43) against 2 and 4:
#      AllReduce bf16 256K-64M (3 rounds each), EP expanded ht / ll over tcp (2 rounds 1 vs 2, 1 round 1 vs 4).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 460
{ nvidia-smi -q | grep -iE "product name|bus id"; nproc; } > $CALL_DIR/host.txt 2>&1
call_build_dir build-device "ferry-bench ferry_gpu_tests ferry_gpu_fault_tests"
T=build-device/tests/ferry_gpu_tests; F=build-device/tests/ferry_gpu_fault_tests; N=$ROOT/build-device/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none"; VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
TCP="$VN -x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
call_run tcp_2x1_s2 100 $M -np 2 $TCP $T --gtest_filter="*AllReduce*:Ep*"
call_run tcp_2x1_s4 70 $M -np 2 $TCP -x FERRY_UCX_TCP_STREAMS=4 $T --gtest_filter="*AllReduce*:Ep*"
grep -a "FAILED  \]\|Failure\|Which is\|timed out\|tcp streams" $CALL_DIR/tcp_2x1_*.log | head -12
call_run killed_tcp 60 env UCX_TLS=tcp,self $F --gtest_filter="KilledPeer.AcrossNodes"
for k in 1 2 4; do
  call_run net_both_s$k 40 $M -np 2 $TCP -x FERRY_UCX_TCP_STREAMS=$k $N net --memory host --sizes 4M,16M \
    --bytes 256M --both-ways
  call_run net_exchange_s$k 40 $M -np 2 $TCP -x FERRY_UCX_TCP_STREAMS=$k $N net --memory host --exchange \
    --sizes 1M,16M,64M --bytes 512M --no-perftest
done
grep -ah "^host\|^exchange" $CALL_DIR/net_*.log
for k in 1 2 4; do
  printf '#!/bin/bash\nexport FERRY_UCX_TCP_STREAMS=%s\nexec %s "$@"\n' $k "$N" > /tmp/s$k.sh; chmod +x /tmp/s$k.sh
done
AR="allreduce --sizes 256K,1M,4M,16M,64M --dtypes bf16 --algos auto"
call_ab ar_s2_ 3 /tmp/s1.sh /tmp/s2.sh "$TCP" $AR
call_ab ar_s4_ 3 /tmp/s1.sh /tmp/s4.sh "$TCP" $AR
call_ab ep_s2_ 2 /tmp/s1.sh /tmp/s2.sh "$TCP" ep --layout expanded --iters 20 --warmup 5
call_ab ep_s4_ 2 /tmp/s1.sh /tmp/s4.sh "$TCP" ep --layout expanded --iters 20 --warmup 5
call_end
