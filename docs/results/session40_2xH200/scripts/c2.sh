# Session 40 c2. run(kind nvidia-h100-x2, carry [".deps", ".ab"]), from a checkout of exp/trace-ll-combine-phases
# (54e9cce) with .ab/ll128 = exp/ar-ll128 (the LL128 one-shot with its shared counter through atomics).
#   1. build-trace (this tree, FERRY_EP_TRACE=1) and .ab/ll128, side by side;
#   2. ll128: *AllReduce* on 2 ranks with FERRY_ALLREDUCE_LL128=1, racecheck of its test;
#   3. the low-latency combine's phase sums (trace build), T=1/128/256;
#   4. A/B on the ll128 binary: auto against auto with LL128 from 128 KiB up (FERRY_ALLREDUCE_PIPELINED_MIN_BYTES),
#      256 KiB - 8 MiB, 3 rounds: where the LL128 one-shot wins (c1: 4 MiB 0.969, 8 MiB 1.036).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 420
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
M="mpirun --allow-run-as-root --bind-to none"; SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_build_trees ferry-bench ll128+ferry_gpu_tests &
FERRY_EP_TRACE=1 call_build_dir build-trace ferry-bench
wait
T=.ab/ll128/build/tests/ferry_gpu_tests; B=$ROOT/.ab/ll128/build/bench/ferry-bench
call_run tests_knob 70 $M -np 2 -x FERRY_ALLREDUCE_LL128=1 $T --gtest_filter="*AllReduce*"
call_run racecheck 40 $M -np 2 $SAN --tool racecheck --error-exitcode 86 $T \
  --gtest_filter="AllReduce.Ll128OneShotEveryTypeAndOp"
BT=build-trace/bench/ferry-bench
for tok in 1 128 256; do
  call_run trace_$tok 25 $M -np 2 $BT ep --mode ll --tokens $tok --no-nccl
  grep -a "ferry ep trace" $CALL_DIR/trace_$tok.log | grep -a "epoch 50 " | grep -a "combine" | head -24
done
printf '#!/bin/bash\nexport FERRY_ALLREDUCE_LL128=1 FERRY_ALLREDUCE_PIPELINED_MIN_BYTES=131072\nexec %s "$@"\n' \
  "$B" > /tmp/ll128.sh && chmod +x /tmp/ll128.sh
call_ab ll128_ 3 $B /tmp/ll128.sh "" allreduce --dtypes bf16 --sizes 256K,512K,1M,2M,3M,4M,6M,8M --algos auto \
  --no-nccl --check
call_end
