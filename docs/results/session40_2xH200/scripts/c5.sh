# Session 40 c5. run(kind nvidia-h100-x2, carry [".deps", ".ab"]), from a checkout of main (the working tree: the
# code submitted this session, the LL128 one-shot AllReduce merged), with
#   .ab/c128 = exp/combine-ll128 rebased on main (the LL combine's peer partials as LL128 lines behind
#              FERRY_EP_COMBINE_LL128, off by default; helper-prepared, not GPU-run before),
#   .ab/nap  = main + patches/ll128_nap.patch (the LL128 AllReduce's poll sleeps 64 ns after 4 misses).
#   1. builds side by side;
#   2. main: *AllReduce* and Ep* on 2 ranks (the submitted code's GPU tests);
#   3. c128: Ep.LowLatencyCombineLl128MatchesReadyWords and the low-latency Ep tests with the knob set for every
#      buffer (-x FERRY_EP_COMBINE_LL128=1), 2 ranks and 3 shared ranks (inert there); memcheck / racecheck /
#      synccheck of the new test;
#   4. c128 A/B on one binary: knob off against on, LL T=1/128/256/512, 3 rounds, --check;
#   5. nap A/B: main against nap, both with the LL128 range at 32 MiB, 2-32 MiB, 2 rounds; main's default against
#      nap with that range (the pipelined one-shot above 6 MiB against LL128 with the sleep), 8-32 MiB.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 560
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
M="mpirun --allow-run-as-root --bind-to none"; SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_build_trees ferry-bench c128+ferry_gpu_tests nap &
call_build_dir build-device "ferry-bench ferry_gpu_tests"
wait
T=build-device/tests/ferry_gpu_tests; N=$ROOT/build-device/bench/ferry-bench
TC=.ab/c128/build/tests/ferry_gpu_tests; BC=$ROOT/.ab/c128/build/bench/ferry-bench
call_run main_ar 60 $M -np 2 $T --gtest_filter="*AllReduce*"
call_run main_ep 100 $M -np 2 $T --gtest_filter="Ep*"
LLT='Ep.LowLatencyCombineLl128*:Ep/EpMatrix.*ll*:Ep.LowLatency*:Ep.Staged*:Ep.TokensWithoutExperts:Ep.SkewAll*:Ep.HandleReuse*'
call_run c128_ep 80 $M -np 2 -x FERRY_EP_COMBINE_LL128=1 $TC --gtest_filter="$LLT"
call_run c128_np3 60 $M -np 3 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_EP_COMBINE_LL128=1 $TC \
  --gtest_filter='Ep.LowLatencyCombineLl128*:Ep/EpMatrix.*ll*'
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/main_*.log $CALL_DIR/c128_*.log | head -12
for tool in memcheck racecheck synccheck; do
  call_run c128_$tool 50 $M -np 2 $SAN --tool $tool --error-exitcode 86 $TC \
    --gtest_filter="Ep.LowLatencyCombineLl128MatchesReadyWords"
done
if ! grep -aq "FAILED  \]" $CALL_DIR/c128_*.log; then
  printf '#!/bin/bash\nexport FERRY_EP_COMBINE_LL128=1\nexec %s "$@"\n' "$BC" > /tmp/c128.sh && chmod +x /tmp/c128.sh
  call_ab c128_ 3 $BC /tmp/c128.sh "" ep --mode ll --tokens 1,128,256,512 --check
fi
for b in main nap; do
  bin=$N; [ $b = nap ] && bin=$ROOT/.ab/nap/build/bench/ferry-bench
  printf '#!/bin/bash\nexport FERRY_ALLREDUCE_LL128_MAX_BYTES=33554432\nexec %s "$@"\n' "$bin" > /tmp/w_$b.sh
  chmod +x /tmp/w_$b.sh
done
call_ab nap_ 2 /tmp/w_main.sh /tmp/w_nap.sh "" allreduce --dtypes bf16 --sizes 2M,4M,8M,16M,32M --algos auto \
  --no-nccl --check
call_ab napd_ 2 $N /tmp/w_nap.sh "" allreduce --dtypes bf16 --sizes 8M,16M,32M --algos auto --no-nccl --check
call_end
