# Session 40 c6. run(kind nvidia-h100-x2, carry [".deps", ".ab"]), from a checkout of main 73af060 with
# patches/ll128_reduce2.patch applied (the LL128 one-shot's reduce warps poll two units at once; ptxas 64 registers,
# no spills), .ab/base = main, .ab/p2 = main + patches/ll128_push2.patch (push warps 2 units in flight, not 4).
#   1. builds side by side; 2. this tree: *AllReduce* on 2 ranks, AllReduce.* on 3 shared ranks, memcheck /
#   racecheck / synccheck of AllReduce.Ll128OneShotEveryTypeAndOp; 3. A/B base against this tree and against p2,
#   256 KiB - 6 MiB, 3 rounds, --check; 4. the torch bench with this tree, 1 - 16 MiB.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 450
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
M="mpirun --allow-run-as-root --bind-to none"; SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_build_trees ferry-bench base p2 &
call_build_dir build-device "ferry-bench ferry_gpu_tests ferry_python"
wait
T=build-device/tests/ferry_gpu_tests; N=$ROOT/build-device/bench/ferry-bench; B=$ROOT/.ab/base/build/bench/ferry-bench
call_run tests 60 $M -np 2 $T --gtest_filter="*AllReduce*"
call_run tests_np3 60 $M -np 3 -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter="AllReduce.*"
for tool in memcheck racecheck synccheck; do
  call_run $tool 50 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter="AllReduce.Ll128OneShotEveryTypeAndOp"
done
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/tests*.log | head -12
S=256K,1M,2M,3M,4M,6M
call_ab r2_ 3 $B $N "" allreduce --dtypes bf16 --sizes $S --algos auto --no-nccl --check
call_ab p2_ 3 $B $ROOT/.ab/p2/build/bench/ferry-bench "" allreduce --dtypes bf16 --sizes $S --algos auto --no-nccl --check
export PYTHONPATH="$ROOT/build-device/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
call_run torch_ar 50 python3 -m torch.distributed.run --standalone --nproc-per-node 2 \
  bench/python/ferry_torch_bench.py --what allreduce --sizes 1M:16M:2 --out $CALL_DIR/torch_ar
grep -aE "^ +[0-9]+[KM]: ferry" $CALL_DIR/torch_ar.log | tail -5
call_end
